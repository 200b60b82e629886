package task

import "testing"

// TestMainImage: the compose file's main service wins when it names an
// image or a build, else task.toml's docker_image and environment/.
func TestMainImage(t *testing.T) {
	for _, tc := range []struct {
		name string
		task Task
		want Image
	}{
		{"task.toml", Task{Image: "alpine", EnvDir: "/t/environment"}, Image{Pull: "alpine", Context: "/t/environment"}},
		{"compose main builds", Task{Image: "alpine", EnvDir: "/t/environment", Compose: &Compose{Main: Service{BuildDir: "/t/environment/main", Dockerfile: "Dockerfile.main"}}},
			Image{Context: "/t/environment/main", Dockerfile: "Dockerfile.main"}},
		{"compose main pulls", Task{EnvDir: "/t/environment", Compose: &Compose{Main: Service{Image: "debian"}}}, Image{Pull: "debian"}},
		{"compose main names neither", Task{Image: "alpine", Compose: &Compose{Main: Service{Name: "main"}}}, Image{Pull: "alpine"}},
		{"none", Task{}, Image{}},
	} {
		if got := tc.task.MainImage(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	s := Service{Image: "redis", BuildDir: "/t/environment/kv", Dockerfile: "Dockerfile.kv"}
	if got := s.ImageSource(); got != (Image{Pull: "redis", Context: "/t/environment/kv", Dockerfile: "Dockerfile.kv"}) {
		t.Errorf("a service's image: %+v", got)
	}
}
