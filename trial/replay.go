package trial

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nbd-wtf/go-nostr/nip19"

	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// Replay is a recorded trial to run again with the gateway answering each
// agent's n-th call from the recording (package llm, replay.go): the same
// task and roster, in a fresh container, for nothing.
type Replay struct {
	// Dir is the recorded trial's folder.
	Dir string
	// Recorded is its result.json.
	Recorded *trialdir.TrialResult
	// Calls are its agents' conversation records, by agent id.
	Calls map[string][]modelcall.Call
	// Members are its members' pubkeys by id, the trial user's as "user".
	Members map[string]string
	// OnDivergence is what the replay does when an agent leaves its
	// recording.
	OnDivergence modelcall.DivergencePolicy
	// Warnings are what the recording lacks that a replay may miss.
	Warnings []string
}

// ErrReplayDiverged: a replay stopped at an agent's first call off its
// recording (--on-divergence stop).
const ErrReplayDiverged ErrorKind = "ReplayDiverged"

// ReplayDiverged ends a replay at its first divergence, with no verdict.
const ReplayDiverged Reason = "replay_diverged"

// LoadReplay reads a recorded trial folder: its result, its members and
// every agent's conversation record.
func LoadReplay(dir string, policy modelcall.DivergencePolicy) (*Replay, error) {
	res, err := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a finished trial's folder: it has no result.json (give a trial folder, jobs/<job>/<task>__<condition>__<attempt>)", dir)
	}
	if err != nil {
		return nil, err
	}
	if res.TrialID == "" {
		hint := "<job>/<task>__<condition>__<attempt>"
		if names := FinishedTrials(dir); len(names) > 0 {
			hint = filepath.Join(dir, names[0]) + ", or another of " + clip.Head(strings.Join(names, ", "), 300)
		}
		return nil, fmt.Errorf("%s is not a trial's folder (a job's?): give a trial folder, %s", dir, hint)
	}
	if res.ManifestPath == OracleManifestPath {
		return nil, fmt.Errorf("trial %s ran the oracle (the task's solution/solve.sh): it called no model, and there is nothing to replay", dir)
	}
	rp := &Replay{Dir: dir, Recorded: res, Calls: map[string][]modelcall.Call{}, OnDivergence: policy}
	if rp.Members, err = readMembers(dir); err != nil {
		return nil, err
	}
	recorded := 0
	var unverified []string
	for _, a := range res.Agents {
		file := filepath.Join(dir, filepath.FromSlash(trialdir.Conversation(a.ID)))
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			if a.Usage.Calls > 0 {
				rp.Warnings = append(rp.Warnings, fmt.Sprintf("agent %s made %d calls but has no conversation record: any call of it diverges", a.ID, a.Usage.Calls))
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("trial %s: %w", dir, err)
		}
		recorded++
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		rr := modelcall.NewRecordReader(zr, modelcall.RecordLimits{})
		var calls []modelcall.Call
		if err := rr.Each(func(c modelcall.Call) { calls = append(calls, c) }); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		missing := rr.Missing()
		if !rr.Verified() {
			unverified = append(unverified, a.ID)
		}
		if missing > 0 {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s: %d calls name blocks the record lacks (it was bounded): they cannot be replayed", file, missing))
		}
		if int64(len(calls)) < a.Usage.Calls {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s holds %d of the agent's %d calls (the record was bounded): the missing ones cannot be replayed", file, len(calls), a.Usage.Calls))
		}
		rp.Calls[a.ID] = calls
	}
	if len(unverified) > 0 {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("the conversation records of %s have no digests (they were written before troupe verified records): their calls are replayed unverified", strings.Join(unverified, ", ")))
	}
	if recorded == 0 {
		return nil, fmt.Errorf("trial %s kept no conversation (%s): it ran with --record meta or none, and there is nothing to replay; run it again with --record full (the default)", dir, trialdir.Conversation("<id>"))
	}
	return rp, nil
}

// gateway is the replay as the gateway plays it, in a trial whose id and
// members are given: each recorded value beside its counterpart.
func (rp *Replay) gateway(trialID string, members map[string]string) *llm.Replay {
	same := Translate(rp.Recorded.TrialID, rp.Members, func(v Own) string {
		switch v.Kind {
		case OwnTrialID:
			return trialID
		case OwnNpub:
			npub, _ := nip19.EncodePublicKey(members[v.Member])
			return npub
		}
		return members[v.Member]
	})
	return &llm.Replay{Calls: rp.Calls, Same: same, OnDivergence: rp.OnDivergence}
}

// Own is a value a recorded trial had of its own, which another run of it
// has anew: its id, a member's pubkey (hex or npub).
type Own struct {
	Kind OwnKind
	// Member is the pubkey's member id ("user" for the trial's user).
	Member string
}

// OwnKind is which of a trial's own values an Own is.
type OwnKind int

const (
	OwnTrialID OwnKind = iota
	OwnPubkey
	OwnNpub
)

// Translate names a recorded trial's own values (its id, and its members'
// pubkeys, by id, as members.json has them) and gives each its
// counterpart in another run, as to says: a replay's live values, a
// scenario's templates. It is the one translation of a recording's ids,
// so that troupe replay and troupe scenario from-trial cannot differ on
// which values are the trial's own. A value to gives as "" is left out.
func Translate(trialID string, members map[string]string, to func(Own) string) []llm.Same {
	var same []llm.Same
	add := func(name, recorded string, v Own) {
		if now := to(v); recorded != "" && now != "" {
			same = append(same, llm.Same{Name: name, Recorded: recorded, Live: now})
		}
	}
	add("trial id", trialID, Own{Kind: OwnTrialID})
	for _, id := range slices.Sorted(maps.Keys(members)) {
		pk := members[id]
		add("pubkey of "+id, pk, Own{Kind: OwnPubkey, Member: id})
		if npub, err := nip19.EncodePublicKey(pk); err == nil {
			add("npub of "+id, npub, Own{Kind: OwnNpub, Member: id})
		}
	}
	return same
}

// ReadOwn reads what Translate needs of a recorded trial folder: its id
// (result.json's trial_id) and its members' pubkeys (relay/members.json).
func ReadOwn(dir string) (trialID string, members map[string]string, err error) {
	res, err := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
	if err != nil {
		return "", nil, err
	}
	members, err = readMembers(dir)
	return res.TrialID, members, err
}

// Message is a channel message as a replay compares it: who sent it,
// whom it mentions (by member id) and what it says, the trial's id and its
// members' pubkeys named.
type Message struct {
	From     string   `json:"from"`
	Mentions []string `json:"mentions"`
	Content  string   `json:"content"`
}

// TranscriptDiff compares two trials' channel messages.
type TranscriptDiff struct {
	// Recorded and Replayed count each trial's messages.
	Recorded int `json:"recorded"`
	Replayed int `json:"replayed"`
	// At is the first message that differs, from 1; 0 when none does.
	At int `json:"at"`
	// Was and Is are that message in each, nil when that transcript ends
	// before it.
	Was *Message `json:"was"`
	Is  *Message `json:"is"`
}

// CompareTranscripts compares the channel messages of a recorded trial and
// its replay, ids and times aside.
func CompareTranscripts(recordedDir, replayDir string) (TranscriptDiff, error) {
	was, err := readMessages(recordedDir)
	if err != nil {
		return TranscriptDiff{}, err
	}
	is, err := readMessages(replayDir)
	if err != nil {
		return TranscriptDiff{}, err
	}
	d := TranscriptDiff{Recorded: len(was), Replayed: len(is)}
	for i := range max(len(was), len(is)) {
		var a, b *Message
		if i < len(was) {
			a = &was[i]
		}
		if i < len(is) {
			b = &is[i]
		}
		if a == nil || b == nil || a.From != b.From || a.Content != b.Content || !slices.Equal(a.Mentions, b.Mentions) {
			d.At, d.Was, d.Is = i+1, a, b
			break
		}
	}
	return d, nil
}

// readMessages reads a trial's channel messages with its own ids named.
func readMessages(dir string) ([]Message, error) {
	res, err := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
	if err != nil {
		return nil, err
	}
	members, err := readMembers(dir)
	if err != nil {
		return nil, err
	}
	who := map[string]string{}
	names := []string{res.TrialID, "<trial id>"}
	for _, id := range slices.Sorted(maps.Keys(members)) {
		who[members[id]] = id
		names = append(names, members[id], "<pubkey of "+id+">")
	}
	name := strings.NewReplacer(names...)
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(trialdir.Transcript)))
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", dir, err)
	}
	var out []Message
	for line := range bytes.Lines(data) {
		_, ev, ok := trialdir.ParseMessage(line)
		if !ok {
			continue // a bound's marker, or not a message
		}
		m := Message{From: cmp.Or(who[ev.PubKey], ev.PubKey), Content: name.Replace(ev.Content), Mentions: []string{}}
		for _, pk := range trialdir.Mentions(ev) {
			m.Mentions = append(m.Mentions, cmp.Or(who[pk], pk))
		}
		out = append(out, m)
	}
	return out, nil
}

// maxMembersFile bounds members.json when it is read: troupe writes a few
// hundred bytes per member.
const maxMembersFile = 16 << 20

// readMembers reads a trial's relay/members.json: each member's pubkey by
// id, the trial user's as "user".
func readMembers(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(trialdir.Members)))
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", dir, err)
	}
	defer f.Close()
	members, err := trialdir.ReadMembers(io.LimitReader(f, maxMembersFile))
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", dir, err)
	}
	out := map[string]string{}
	for _, m := range members {
		out[m.ID] = m.Pubkey
	}
	return out, nil
}
