package task

// Image is where a container's image comes from: a name to pull (Pull),
// a folder to build (Context, with its Dockerfile; "" is Dockerfile), or
// both, the name tried first.
type Image struct {
	Pull, Context, Dockerfile string
}

// MainImage is the trial container's image, as Harbor chooses it: the
// compose file's main service's image or build when it names one, else
// task.toml's docker_image and environment/. It is the one rule a trial
// and a job's plan both follow; both of its fields are "" when the task
// gives the trial container no image.
func (t *Task) MainImage() Image {
	if c := t.Compose; c != nil && (c.Main.Image != "" || c.Main.BuildDir != "") {
		return Image{Pull: c.Main.Image, Context: c.Main.BuildDir, Dockerfile: c.Main.Dockerfile}
	}
	return Image{Pull: t.Image, Context: t.EnvDir}
}

// ImageSource is where the service's image comes from.
func (s Service) ImageSource() Image {
	return Image{Pull: s.Image, Context: s.BuildDir, Dockerfile: s.Dockerfile}
}
