// Package task reads benchmark tasks in Harbor's format: a folder with
// task.toml, instruction.md, environment/ (a Dockerfile) or a docker_image,
// and tests/test.sh, which writes /logs/verifier/reward.txt or reward.json.
// Load checks a task whole, naming every problem with its file and line,
// before any container starts; Find reads a task or a folder of tasks (a
// dataset). The trial package runs what it returns.
package task
