package job

import (
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
)

// Image is an image a task's trials run in: the trial container's
// (Service "") or a compose sidecar's, pulled by name (Pull), built from a
// folder (Context, with its Dockerfile), or both, the name tried first.
type Image struct {
	// Task is the task's name.
	Task string `json:"task"`
	// Service is the compose sidecar's name; "" for the trial container.
	Service    string `json:"service,omitempty"`
	Pull       string `json:"pull,omitempty"`
	Context    string `json:"context,omitempty"`
	Dockerfile string `json:"dockerfile,omitempty"`
	// Ref is the name a built image has where it cannot be built (a
	// cluster): REPO/troupe-env:<the digest of its folder> (NameImages).
	Ref string `json:"ref,omitempty"`
	// Error is why the image cannot be had or named.
	Error string `json:"error,omitempty"`
}

// errNoImage is a task whose trial container has no image at all.
const errNoImage = "the trial container has no image: the compose file's main service names no image and no build, and the task has no environment/Dockerfile or docker_image"

// TaskImages are the images a trial of t uses, as the trial resolves them:
// the trial container's first (task.MainImage), then each compose
// sidecar's. troupe images build builds those with a Context; a plan
// lists them all.
func TaskImages(t *task.Task) []Image {
	m := t.MainImage()
	main := Image{Task: t.Name, Pull: m.Pull, Context: m.Context, Dockerfile: m.Dockerfile}
	if main.Pull == "" && main.Context == "" {
		main.Error = errNoImage
	}
	images := []Image{main}
	if t.Compose != nil {
		for _, s := range t.Compose.Sidecars {
			img := s.ImageSource()
			images = append(images, Image{Task: t.Name, Service: s.Name, Pull: img.Pull, Context: img.Context, Dockerfile: img.Dockerfile})
		}
	}
	return images
}

// Name is what troupe images build and a dry run call an image: the
// task's name, or task/service for a sidecar.
func (img Image) Name() string {
	if img.Service == "" {
		return img.Task
	}
	return img.Task + "/" + img.Service
}

// Build is how the image is built; its Context is "" when it is not.
func (img Image) Build() runtime.BuildSpec {
	return runtime.BuildSpec{Context: img.Context, Dockerfile: img.Dockerfile}
}

// NameImages names each image the plan builds as a backend that cannot
// build finds it (a cluster: kubernetes.EnvironmentRef, from the digest of
// its folder). It reads every build folder, which Run does not need: the
// Docker runtime names its builds itself.
func (p *Plan) NameImages(name func(runtime.BuildSpec) (string, error)) {
	for i := range p.Images {
		img := &p.Images[i]
		if img.Context == "" {
			continue
		}
		ref, err := name(img.Build())
		if err != nil {
			img.Error = err.Error()
			continue
		}
		img.Ref = ref
	}
}
