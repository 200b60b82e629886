package atif

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// File is one trajectory to write: its file name and what it holds.
type File struct {
	Name       string
	Trajectory Trajectory
	// Calls is the number of model calls it was built from (0 for the
	// team's).
	Calls int
}

// Missing is an agent without a trajectory, and why.
type Missing struct {
	Agent, Reason string
}

// Export is what a trial folder yields: the trajectories and the agents
// that have none.
type Export struct {
	Files   []File
	Missing []Missing
	// Warnings are parts that could not be read whole.
	Warnings []string
}

// ErrNotTrial: the folder holds neither result.json nor relay/members.json.
var ErrNotTrial = errors.New("not a trial folder: no result.json or relay/members.json")

// Trial reads a trial folder: the team from result.json (or
// relay/members.json while the trial has no result), each agent's
// conversation record and call log, and the channel's transcript.
func Trial(dir string) (Export, error) {
	return TrialLimits(dir, modelcall.RecordLimits{})
}

// TrialLimits is Trial reading each conversation record within lim: a
// record is read a call at a time, and a call or a record that would
// expand past lim fails the export with the record's name
// (*modelcall.ExpansionError).
func TrialLimits(dir string, lim modelcall.RecordLimits) (Export, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Export{}, err
	}
	defer root.Close()
	tm, err := readTeam(root)
	if err != nil {
		return Export{}, err
	}
	var x Export
	for _, a := range tm.agents {
		if err := x.addAgent(root, a, tm.res.TrialID, lim); err != nil {
			return x, err
		}
	}
	team, err := teamTrajectory(root, tm, &x)
	if err != nil {
		return x, err
	}
	x.Files = append(x.Files, File{Name: "team.json", Trajectory: team})
	return x, nil
}

// team is who a trial's members were: its result (zero while the trial
// has none), the agents to export, and the channel's members.
type team struct {
	res       trialdir.TrialResult
	hasResult bool
	agents    []AgentInfo
	members   []Member
}

// readTeam reads the team from result.json, or from relay/members.json
// while the trial has no result.
func readTeam(root *os.Root) (team, error) {
	var tm team
	read, resErr := readResult(root)
	var memErr error
	tm.members, memErr = readMembers(root)
	for _, err := range []error{resErr, memErr} {
		if errors.Is(err, errTooBig) {
			return team{}, err
		}
	}
	tm.hasResult = resErr == nil
	if tm.hasResult {
		tm.res = *read
	}
	if !tm.hasResult && memErr != nil {
		return team{}, ErrNotTrial
	}
	res := tm.res
	if tm.hasResult && len(res.Agents) > 0 {
		for _, a := range res.Agents {
			tm.agents = append(tm.agents, AgentInfo{ID: a.ID, Role: a.Role, Kind: a.Kind, Endpoint: a.Endpoint, Stack: a.Stack, StackDigest: a.StackDigest, Version: res.Version, Usage: ptr(a.Usage)})
		}
	} else {
		for _, m := range tm.members {
			if m.Kind != "user" {
				tm.agents = append(tm.agents, AgentInfo{ID: m.ID, Role: m.Role, Kind: m.Kind, Version: res.Version})
			}
		}
	}
	if len(tm.members) == 0 {
		// A trial from before members.json: its agents; the user unknown.
		for _, a := range res.Agents {
			tm.members = append(tm.members, a.Member())
		}
	}
	return tm, nil
}

// addAgent adds an agent's trajectory, built from its conversation record
// and call log, or says why it has none.
func (x *Export) addAgent(root *os.Root, a AgentInfo, trialID string, lim modelcall.RecordLimits) error {
	if !safeID(a.ID) || a.ID == "team" {
		x.Missing = append(x.Missing, Missing{a.ID, "its id cannot name a file beside team.json"})
		return nil
	}
	rec := trialdir.Conversation(a.ID)
	meter, err := readMeter(root, trialdir.Calls(a.ID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		x.Warnings = append(x.Warnings, fmt.Sprintf("%s: %v: metrics are the answers' usage", trialdir.Calls(a.ID), err))
	}
	b, missing, err := readRecord(root, rec, lim, meter)
	if errors.Is(err, fs.ErrNotExist) {
		x.Missing = append(x.Missing, Missing{a.ID, "no conversation record (" + rec + "): the trial was run with --record meta or none"})
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rec, err)
	}
	if missing > 0 {
		x.Warnings = append(x.Warnings, fmt.Sprintf("%s: %d parts of requests were dropped by the record's bound", rec, missing))
	}
	if b.calls == 0 {
		x.Missing = append(x.Missing, Missing{a.ID, "it made no model calls"})
		return nil
	}
	t := b.trajectory(a)
	t.SessionID = trialID
	x.Files = append(x.Files, File{Name: a.ID + ".json", Trajectory: t, Calls: b.calls})
	return nil
}

// teamTrajectory is the team channel's trajectory, from its transcript.
func teamTrajectory(root *os.Root, tm team, x *Export) (Trajectory, error) {
	tf, err := root.Open(trialdir.Transcript)
	var tr io.Reader = strings.NewReader("")
	switch {
	case err == nil:
		defer tf.Close()
		tr = io.LimitReader(tf, maxLogRead)
	case errors.Is(err, fs.ErrNotExist):
		x.Warnings = append(x.Warnings, trialdir.Transcript+": not found: the team trajectory has no messages")
	default:
		return Trajectory{}, err
	}
	res := tm.res
	t, err := FromTranscript(tr, tm.members, res.Version)
	if err != nil {
		return Trajectory{}, err
	}
	t.SessionID = res.TrialID
	t.Extra = map[string]any{"trial_name": res.TrialName, "task_name": res.TaskName, "condition": res.Condition, "outcome": string(res.Outcome)}
	if !tm.hasResult {
		t.Extra = nil
	}
	return t, nil
}

// Write stores each file in dir, which it makes if need be, and returns
// the paths written.
func Write(dir string, files []File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var written []string
	for _, f := range files {
		data, err := Marshal(f.Trajectory)
		if err != nil {
			return written, fmt.Errorf("encode %s: %w", f.Name, err)
		}
		if err := root.WriteFile(f.Name, data, 0o644); err != nil {
			return written, err
		}
		written = append(written, path.Join(dir, f.Name))
	}
	return written, nil
}

// safeID: an agent id that names a file, nothing else.
func safeID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// maxJSONFile bounds relay/members.json as trialdir bounds result.json:
// troupe writes them small, and one of gigabytes is no trial's.
const maxJSONFile = trialdir.MaxResult

// maxLogRead bounds what is read of a call log or the transcript: a trial
// keeps under 8 and 32 MiB of them (trial.DefaultBounds).
const maxLogRead = 256 << 20

// errTooBig is trialdir's, so that a result.json and a members.json over
// their bound are refused alike.
var errTooBig = trialdir.ErrTooBig

// readResult reads result.json through the format's reader.
func readResult(root *os.Root) (*trialdir.TrialResult, error) {
	f, err := root.Open(trialdir.Result)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res, err := trialdir.DecodeResult(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", trialdir.Result, err)
	}
	return res, nil
}

// readMembers reads relay/members.json through the roster's reader, within
// its bound.
func readMembers(root *os.Root) ([]Member, error) {
	f, err := root.Open(trialdir.Members)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxJSONFile {
		return nil, fmt.Errorf("%s: over %d bytes: %w", trialdir.Members, maxJSONFile, errTooBig)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxJSONFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJSONFile {
		return nil, fmt.Errorf("%s: over %d bytes: %w", trialdir.Members, maxJSONFile, errTooBig)
	}
	return trialdir.ReadMembers(bytes.NewReader(data))
}

// readRecord builds an agent's trajectory from its conversation record,
// a call at a time.
func readRecord(root *os.Root, name string, lim modelcall.RecordLimits, meter func(modelcall.Call) (modelcall.Record, bool)) (*builder, int, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, err
	}
	rr := modelcall.NewRecordReader(zr, lim)
	b := newBuilder()
	if err := rr.Each(func(c modelcall.Call) { b.call(c, meter) }); err != nil {
		return nil, rr.Missing(), err
	}
	return b, rr.Missing(), nil
}

// readMeter reads an agent's call log and finds a recorded call's line in
// it: both are stamped with the call's start.
func readMeter(root *os.Root, name string) (func(modelcall.Call) (modelcall.Record, bool), error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byStart := map[int64][]modelcall.Record{}
	err = modelcall.ReadRecords(io.LimitReader(f, maxLogRead), func(r modelcall.Record) {
		if !r.Time.IsZero() {
			k := r.Time.UnixNano()
			byStart[k] = append(byStart[k], r)
		}
	})
	if err != nil {
		return nil, err
	}
	return func(c modelcall.Call) (modelcall.Record, bool) {
		rs := byStart[c.Time.UnixNano()]
		if len(rs) == 0 {
			return modelcall.Record{}, false
		}
		byStart[c.Time.UnixNano()] = rs[1:]
		return rs[0], true
	}, nil
}
