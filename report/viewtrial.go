package report

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/troupebench/troupe/channel"
	"github.com/troupebench/troupe/internal/clip"
	"github.com/troupebench/troupe/modelcall"
	"github.com/troupebench/troupe/trialdir"
)

// The trial page of troupe view: one trial's facts, its channel as a
// timeline, each agent's model calls and logs, the verifier's output.

// Message is one channel message on the trial page, or the notice where
// troupe dropped part of the transcript (Cut).
type Message struct {
	Seq     int
	Time    string
	From    string
	To      []string
	Content string
	Done    bool // the DONE: that ended the trial
	Ignored bool // a DONE: that ended nothing
	Cut     *Cut
}

// Call is one model call on the trial page (a line of the agent's
// llm-calls.jsonl, read by modelcall), or the notice where troupe dropped
// part of the call log (Cut), which is no call.
type Call struct {
	modelcall.Record
	// Time is the call's time, for the page ("" when the line has none).
	Time string
	Cut  *Cut
}

type agentView struct {
	ID, Role, Kind string
	// Conversation links the agent's conversation page.
	Conversation string
	Calls        []Call
	// Empty is what the call table says when it has no row: "no calls",
	// or why there is no call to show although the result records some.
	Empty string
	// NoLog: the call log could not be read although calls are recorded.
	NoLog     bool
	CallsNote string
	// Total is the result's count (the gateway's) once the trial has
	// ended, else the call log's; TotalFrom says which.
	Total       modelcall.Totals
	TotalFrom   string
	Log, Stdout []logPart
}

// member is one member of relay/members.json, or an agent of result.json.
type member = trialdir.Member

// cutFiles lists the files troupe cut when writing them (the result's
// truncated), for the facts.
func cutFiles(truncated map[string]int64) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(truncated)) {
		out = append(out, fmt.Sprintf("%s (%d bytes dropped)", name, truncated[name]))
	}
	return out
}

// replayShown is a replay's record as the page shows it: with a report,
// empty when the result has none, for the template reads its fields.
func replayShown(r *trialdir.ReplayRecord) *trialdir.ReplayRecord {
	if r == nil || r.ReplayReport != nil {
		return r
	}
	c := *r
	c.ReplayReport = &modelcall.ReplayReport{}
	return &c
}

// safeID: an agent id that names a folder inside agents/, nothing else.
func safeID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// openTrial finds the trial a page names and opens its folder, confined
// to the viewer's; on false it has answered the request (404, 500), and
// otherwise the caller closes the folder.
func (v *Viewer) openTrial(w http.ResponseWriter, key string) (*Trial, files, bool) {
	f := v.scan()
	i := slices.IndexFunc(f.trials, func(t *Trial) bool { return v.rel(t.Dir) == key })
	if key == "" || i < 0 {
		http.Error(w, "no such trial under "+v.Dir, http.StatusNotFound)
		return nil, files{}, false
	}
	root, err := os.OpenRoot(v.Dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, files{}, false
	}
	return f.trials[i], files{root: root, dir: key}, true
}

func (v *Viewer) trial(w http.ResponseWriter, key, baseline string) {
	t, tf, ok := v.openTrial(w, key)
	if !ok {
		return
	}
	defer tf.root.Close()
	live := t.Outcome == outcomeRunning

	// The result is the one the scan read (a running trial's has only
	// what its config.json says). trial.log is troupe's alone (each line
	// starts with time=); the other text logs' markers count where the
	// result says they were cut.
	tf.cut = map[string]bool{trialdir.Log: true}
	for name := range t.Truncated {
		tf.cut[name] = true
	}
	roster := readRoster(tf, t.Agents)
	msgs, transcriptNote := readTranscript(tf, speakers(roster), t.Done, live)
	usage := map[string]modelcall.Totals{}
	for _, a := range t.Agents {
		usage[a.ID] = a.Usage
	}
	var agents []agentView
	for _, m := range roster {
		if m.Kind != "user" {
			av := readAgent(tf, m, usage)
			if safeID(m.ID) {
				av.Conversation = withBaseline("/conversation", url.Values{"t": {key}, "agent": {m.ID}}, baseline)
			}
			agents = append(agents, av)
		}
	}
	exception := ""
	if e := t.ExceptionInfo; e != nil {
		exception = string(e.ExceptionType) + ": " + e.ExceptionMessage
	}
	render(w, "trial", map[string]any{
		"Title": t.TrialName, "Running": live, "T": t, "Messages": msgs, "TranscriptNote": transcriptNote, "Agents": agents,
		"Verifier": tf.shown(trialdir.VerifierStdout), "VerifierErr": tf.shown(trialdir.VerifierStderr),
		"TrialLog": tf.shown(trialdir.Log), "Exception": exception, "CutFiles": cutFiles(t.Truncated), "Replay": replayShown(t.Replay),
		"Home": withBaseline("/", url.Values{}, baseline),
	})
}

// readRoster is who took part: the agents of result.json once the trial
// has ended (agents), else of relay/members.json (written when the trial
// starts), and the trial's user.
func readRoster(tf files, agents []trialdir.AgentRecord) []member {
	roster := tf.readMembers()
	if len(agents) > 0 {
		roster = slices.DeleteFunc(roster, func(m member) bool { return m.Kind != "user" })
		for _, a := range agents {
			roster = append(roster, a.Member())
		}
	}
	return roster
}

// speakers names the authors of the transcript's events by public key.
func speakers(roster []member) func(pubkey string) string {
	names := map[string]string{}
	userKnown := false
	for _, m := range roster {
		if m.Kind == "user" {
			names[m.Pubkey], userKnown = "user", true
			continue
		}
		names[m.Pubkey] = fmt.Sprintf("%s (%s)", m.ID, m.Role)
	}
	return func(pk string) string {
		if n, ok := names[pk]; ok {
			return n
		}
		if !userKnown {
			return "user" // results written before members.json
		}
		return "unknown key " + clip.Head(pk, 12)
	}
}

// readTranscript is the channel's messages, the last maxMessages of them,
// with a notice where troupe dropped part of the transcript.
func readTranscript(tf files, name func(string) string, done *trialdir.Done, live bool) ([]Message, string) {
	var msgs []Message
	note, _ := tf.lines(trialdir.Transcript, func(line []byte, cut *Cut) {
		if cut != nil {
			msgs = append(msgs, Message{Cut: cut})
			return
		}
		rec, ev, ok := trialdir.ParseMessage(line)
		if !ok {
			return
		}
		m := Message{Seq: int(rec.Seq), Time: rec.ReceivedAt.UTC().Format("15:04:05.000"), From: name(ev.PubKey), Content: ev.Content}
		for _, pk := range trialdir.Mentions(ev) {
			m.To = append(m.To, name(pk))
		}
		if channel.IsDone(ev.Content) && !live {
			m.Done = done != nil && done.EventID == ev.ID
			m.Ignored = !m.Done
		}
		msgs = append(msgs, m) // at most maxTailBytes of them
	})
	if len(msgs) > maxMessages {
		dropped := len(msgs) - maxMessages
		msgs = slices.Clone(msgs[dropped:])
		note = strings.TrimPrefix(note+fmt.Sprintf("; the first %d messages read are left out: the last %d are shown", dropped, maxMessages), "; ")
	}
	return msgs, note
}

// readAgent reads one agent's calls and logs. The call table and its total
// agree: when the call log is missing, or holds other than the calls the
// result records, the page says so rather than "no calls" above "30 calls".
func readAgent(tf files, m member, usage map[string]modelcall.Totals) agentView {
	av := agentView{ID: m.ID, Role: m.Role, Kind: m.Kind, Empty: "no calls"}
	if !safeID(m.ID) {
		av.Log = []logPart{{Text: "(an agent id that is not a folder name: nothing is read for it)"}}
		return av
	}
	logName := trialdir.Calls(m.ID)
	var inLog modelcall.Totals // what the call log holds
	var cuts, shown int
	note, err := tf.lines(logName, func(line []byte, cut *Cut) {
		if cut != nil {
			cuts++
			if len(av.Calls) < maxCallsPerPage {
				av.Calls = append(av.Calls, Call{Cut: cut})
			}
			return
		}
		r, ok := modelcall.ParseRecord(line)
		if !ok {
			return
		}
		c := Call{Record: r}
		if !r.Time.IsZero() {
			c.Time = clock(r.Time)
		}
		if !c.Uncounted {
			inLog.Calls++
		}
		inLog.AddUsage(r)
		if len(av.Calls) < maxCallsPerPage {
			av.Calls = append(av.Calls, c)
			shown++
		}
	})
	recorded, ended := usage[m.ID]
	av.Total, av.TotalFrom = inLog, "counted in the call log"
	if ended {
		av.Total, av.TotalFrom = recorded, "the result's count" // the gateway's own, whatever the page read
	}
	notes := []string{note}
	switch {
	case errors.Is(err, fs.ErrNotExist) && recorded.Calls > 0:
		av.Empty, av.NoLog = fmt.Sprintf("the call log %s is missing; the result records %d calls", logName, recorded.Calls), true
	case errors.Is(err, fs.ErrNotExist):
		av.Empty = "no calls (and no call log)"
	case err != nil:
		av.Empty, av.NoLog = fmt.Sprintf("the call log is not read (%v); the result records %d calls", err, recorded.Calls), true
	case ended && cuts == 0 && inLog.Calls != recorded.Calls:
		notes = append(notes, fmt.Sprintf("the call log holds %d calls; the result records %d", inLog.Calls, recorded.Calls))
	}
	if int64(shown) < inLog.Calls {
		notes = append(notes, fmt.Sprintf("the first %d of the %d calls in the log are shown", shown, inLog.Calls))
	}
	av.CallsNote = strings.Join(slices.DeleteFunc(notes, func(s string) bool { return s == "" }), "; ")
	av.Log, av.Stdout = tf.shown(trialdir.Stderr(m.ID)), tf.shown(trialdir.Stdout(m.ID))
	return av
}
