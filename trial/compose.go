package trial

import (
	"context"
	"maps"

	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/task"
)

// imageSpec is how the trial container's image is made: the compose
// file's main service when it names an image or a build, else the task's
// docker_image or environment/Dockerfile.
func imageSpec(t *task.Task) runtime.ImageSpec {
	if c := t.Compose; c != nil && (c.Main.Image != "" || c.Main.BuildDir != "") {
		return runtime.ImageSpec{Image: c.Main.Image, Build: build(c.Main.BuildDir, c.Main.Dockerfile)}
	}
	return runtime.ImageSpec{Image: t.Image, Build: build(t.EnvDir, "")}
}

// containerEnv is every process's environment in the trial container: the
// compose file's for main, then the task's [environment] env, which wins.
func containerEnv(t *task.Task) []string {
	env := map[string]string{}
	if t.Compose != nil {
		maps.Copy(env, t.Compose.Main.Env)
	}
	maps.Copy(env, t.Env)
	return envList(env)
}

// services resolves the compose file's sidecars' images, under the build
// timeout's context, and describes them for the runtime.
func (r *run) services(ctx context.Context) ([]runtime.ServiceSpec, []runtime.Dependency, error) {
	c := r.spec.Task.Compose
	if c == nil {
		return nil, nil, nil
	}
	var out []runtime.ServiceSpec
	for _, s := range c.Sidecars {
		img, err := r.env.Runtime.Image(ctx, runtime.ImageSpec{Image: s.Image, Build: build(s.BuildDir, s.Dockerfile)})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, runtime.ServiceSpec{
			Name: s.Name, Image: img.Ref, Entrypoint: s.Entrypoint, Cmd: s.Command, Env: envList(s.Env),
			WorkDir: s.WorkDir, User: s.User, Healthcheck: s.Healthcheck, DependsOn: s.DependsOn,
		})
	}
	return out, c.Main.DependsOn, nil
}

// build is the image a folder builds, nil without one.
func build(dir, dockerfile string) *runtime.BuildSpec {
	if dir == "" {
		return nil
	}
	return &runtime.BuildSpec{Context: dir, Dockerfile: dockerfile}
}
