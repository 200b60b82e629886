package trial

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/troupebench/troupe/internal/capfile"
	"github.com/troupebench/troupe/runtime"
	"github.com/troupebench/troupe/runtime/inside"
	"github.com/troupebench/troupe/trialdir"
)

// The image's own first process (docs/run.md, step 2): Harbor keeps a
// task image's ENTRYPOINT and replaces only its command, with
// harborCommand; troupe init starts the same process as its child.

// harborCommand is the command Harbor's compose files give the main
// service (docker-compose-build.yaml, docker-compose-prebuilt.yaml).
var harborCommand = []string{"sh", "-c", "sleep infinity"}

// mainProcess is what Docker would start first in a container made from
// img under Harbor's compose files: the image's ENTRYPOINT followed by
// harborCommand, as the image's user, in its working folder. An image
// without an ENTRYPOINT runs harborCommand alone under Harbor, which does
// nothing: nil, nothing is started.
func mainProcess(img runtime.Image) *inside.Main {
	if len(img.Entrypoint) == 0 {
		return nil
	}
	return &inside.Main{Cmd: append(slices.Clone(img.Entrypoint), harborCommand...), User: img.User, WorkDir: img.WorkDir}
}

// initCommand is the trial container's entrypoint: troupe init, told the
// main process to start when the image has one.
func initCommand(img runtime.Image) []string {
	cmd := []string{runtime.BinaryPath, "init"}
	if m := mainProcess(img); m != nil {
		arg, _ := json.Marshal(m)
		cmd = append(cmd, "--main", string(arg))
	}
	return cmd
}

// collectEntrypoint records what became of the main process: its status
// in the result and trial.log, its output in the trial folder's
// entrypoint.log (scrubbed like every file of the container's). A main
// process that exited, even early and with an error, does not end the
// trial: the agents and the verifier find the container as it left it.
func (r *run) collectEntrypoint(ctx context.Context) {
	if r.container == nil || mainProcess(r.img) == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.env.Limits.scale(callTimeout))
	defer cancel()
	out, err := r.callInside(cctx, "entrypoint", "", nil)
	var answer struct {
		Status *inside.MainStatus `json:"status"`
		Log    []byte             `json:"log"`
	}
	if err == nil {
		err = json.Unmarshal(out, &answer)
	}
	if err != nil {
		r.log.Warn("the image's entrypoint: its status could not be read", "err", err.Error())
		return
	}
	st := answer.Status
	r.res.Entrypoint = st
	switch {
	case st == nil:
		r.log.Warn("the image's entrypoint was not started: troupe init has no record of it")
	case st.StartError != "":
		r.log.Warn("the image's entrypoint could not be started", "cmd", st.Cmd, "err", st.StartError)
	case st.Exited:
		code := "signal " + st.Signal
		if st.ExitCode != nil {
			code = fmt.Sprint(*st.ExitCode)
		}
		r.log.Warn("the image's entrypoint exited (Harbor's container would have stopped with it); the trial went on", "cmd", st.Cmd, "exit", code, "at", st.ExitedAt)
	default:
		r.log.Info("the image's entrypoint ran until the end", "cmd", st.Cmd, "pid", st.PID)
	}
	log, err := r.openSink(trialdir.EntrypointLog, capfile.Limit{Head: inside.MaxMainLog})
	if err != nil {
		r.cleanupError("write "+trialdir.EntrypointLog, err)
		return
	}
	// closeSinks closes it with the trial's other files.
	if _, err := log.Write(answer.Log); err != nil {
		r.cleanupError("write "+trialdir.EntrypointLog, err)
	}
}
