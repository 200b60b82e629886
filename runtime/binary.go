package runtime

// BinaryPath is where troupe's binary is placed in every trial container.
const BinaryPath = "/opt/troupe/bin/troupe"

// Binary is troupe's own executable, read once, to copy into containers:
// the same binary runs there as init, tunnel, sweep and agent.
// runtime/staticbin reads one and checks that it can run in any container,
// or builds one.
type Binary struct {
	Path   string
	Data   []byte
	SHA256 string
}
