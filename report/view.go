package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Viewer is troupe view: a read-only web UI over the job folders under
// Dir. Every page reads the folders again, so a running job shows its
// progress, trials without a result yet included; pages of a running job
// refresh themselves. It serves only what it finds under Dir: trial folders
// are addressed by their path under Dir and looked up among those found,
// and their files are opened inside Dir, regular files only, never through
// a link or a pipe.
type Viewer struct {
	Dir string
	// Hosts are the names the viewer answers to besides localhost and the
	// loopback addresses; "*" answers any. A page asked for under another
	// name (a DNS-rebinding site in the user's browser) gets 403.
	Hosts []string
}

// Limits of what one page reads, so a huge trial cannot exhaust memory.
const (
	maxShown        = 256 << 10 // of a log or verifier output
	maxLineBytes    = 4 << 20   // one transcript or call line
	maxTailBytes    = 16 << 20  // of a transcript or call log
	maxMessages     = 2000      // the last ones are shown
	maxCallsPerPage = 2000
)

var viewPages = template.Must(template.New("view").Funcs(funcs).Funcs(template.FuncMap{
	"deref": func(p *float64) float64 { return *p },
}).ParseFS(templateFS, "templates/parts.html", "templates/view.html"))

func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !v.hostAllowed(r.Host) {
		http.Error(w, "troupe view answers only to localhost (or the host given with --addr)", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "troupe view is read-only", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/":
		v.index(w)
	case "/trial":
		v.trial(w, r.URL.Query().Get("t"))
	default:
		http.NotFound(w, r)
	}
}

func (v *Viewer) hostAllowed(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return slices.ContainsFunc(v.Hosts, func(h string) bool { return h == "*" || strings.EqualFold(h, host) })
}

// render executes a page into a buffer first, so an error is a clean 500.
func render(w http.ResponseWriter, page string, data any) {
	var buf bytes.Buffer
	if err := viewPages.ExecuteTemplate(&buf, page, data); err != nil {
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(buf.Bytes())
}

// A running trial has a config.json and no result.json yet.
const outcomeRunning = "running"

// found is what one scan of Dir finds.
type found struct {
	trials []*Trial // finished and running, in Load's order
	jobs   []string // folders holding a job's lock.json
	errs   []error
}

// scan finds the trials under Dir, finished or not, and the job folders.
func (v *Viewer) scan() found {
	var f found
	err := walkFolders(v.Dir, func(dir string) bool {
		if _, err := os.Lstat(filepath.Join(dir, "lock.json")); err == nil {
			f.jobs = append(f.jobs, dir)
		}
		t, err := readTrial(filepath.Join(dir, "result.json"))
		if err != nil {
			f.errs = append(f.errs, err)
			return false
		}
		if t == nil {
			t = readRunning(dir)
		}
		if t != nil {
			f.trials = append(f.trials, t)
		}
		return t != nil
	})
	if err != nil {
		f.errs = append(f.errs, err)
	}
	sortTrials(f.trials)
	return f
}

// readRunning reads a trial that has started and not finished: its
// config.json, written first.
func readRunning(dir string) *Trial {
	data, info, err := readRegular(filepath.Join(dir, "config.json"))
	if data == nil || err != nil {
		return nil
	}
	var c struct {
		Name    string `json:"trial_name"`
		Attempt int    `json:"attempt"`
		Task    struct {
			Name, Checksum string
		} `json:"task"`
		Manifest struct {
			Condition, Sha256 string
		} `json:"manifest"`
	}
	if json.Unmarshal(data, &c) != nil || c.Name == "" || c.Task.Name == "" {
		return nil
	}
	return &Trial{Dir: dir, Job: filepath.Dir(dir), Name: c.Name, Task: c.Task.Name, Attempt: c.Attempt,
		Condition: c.Manifest.Condition, ManifestHash: c.Manifest.Sha256, TaskChecksum: c.Task.Checksum,
		Outcome: outcomeRunning, StartedAt: info.ModTime()}
}

type jobRow struct {
	Name                                   string
	Trials, Passed, Failed, Other, Running int
	JobRunning                             bool
}

type trialRow struct {
	Key string
	T   *Trial
}

func (v *Viewer) index(w http.ResponseWriter) {
	f := v.scan()
	if len(f.trials) == 0 && len(f.jobs) == 0 {
		msg := fmt.Sprintf("no jobs or trials under %s: give troupe run's --out folder", v.Dir)
		if len(f.errs) > 0 {
			msg += "\n" + errors.Join(f.errs...).Error()
		}
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	var finished []*Trial
	jobs := map[string]*jobRow{}
	job := func(dir string) *jobRow {
		j := jobs[dir]
		if j == nil {
			j = &jobRow{Name: v.rel(dir), JobRunning: jobRunning(dir)}
			jobs[dir] = j
		}
		return j
	}
	for _, dir := range f.jobs {
		job(dir)
	}
	var rows []trialRow
	for _, t := range f.trials {
		j := job(t.Job)
		j.Trials++
		switch t.Outcome {
		case passed:
			j.Passed++
		case failed:
			j.Failed++
		case outcomeRunning:
			j.Running++
		default:
			j.Other++
		}
		if t.Outcome != outcomeRunning {
			finished = append(finished, t)
		}
		rows = append(rows, trialRow{Key: v.rel(t.Dir), T: t})
	}
	running := false
	var jobList []*jobRow
	for _, j := range jobs {
		jobList = append(jobList, j)
		running = running || j.JobRunning || j.Running > 0
	}
	slices.SortFunc(jobList, func(a, b *jobRow) int { return strings.Compare(a.Name, b.Name) })
	c, err := Compare(finished, "")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var problems []string
	for _, e := range f.errs {
		problems = append(problems, e.Error())
	}
	render(w, "index", map[string]any{
		"Title": v.Dir, "Dir": v.Dir, "Running": running, "Jobs": jobList, "Trials": rows, "C": c, "Problems": problems,
		"PassRate": template.HTML(passRateChart(c)), "Pareto": template.HTML(paretoChart(c)), "Grid": template.HTML(gridChart(c)),
	})
}

// jobRunning: a job whose result.json has no finished_at is running (or
// was interrupted; either way it may change).
func jobRunning(dir string) bool {
	data, _, err := readRegular(filepath.Join(dir, "result.json"))
	if data == nil || err != nil {
		return false
	}
	var res struct {
		FinishedAt *time.Time `json:"finished_at"`
		Total      int        `json:"n_total_trials"`
	}
	return json.Unmarshal(data, &res) == nil && res.Total > 0 && res.FinishedAt == nil
}

func (v *Viewer) rel(p string) string {
	r, err := filepath.Rel(v.Dir, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// Message is one channel message on the trial page.
type Message struct {
	Seq     int
	Time    string
	From    string
	To      []string
	Content string
	Done    bool // the DONE: that ended the trial
	Ignored bool // a DONE: that ended nothing
}

// Call is one model call on the trial page.
type Call struct {
	Time         string  `json:"-"`
	RawTime      string  `json:"time"`
	Status       int     `json:"status"`
	InputTokens  int64   `json:"input_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	LatencyMS    float64 `json:"latency_ms"`
	ErrorClass   string  `json:"error_class"`
	Error        string  `json:"error"`
}

type agentView struct {
	ID, Role, Kind string
	Calls          []Call
	CallsNote      string
	Total          RoleUsage
	Log, Stdout    string
}

// member is one line of relay/members.json, or an agent of result.json.
type member struct {
	ID, Role, Kind, Pubkey string
}

// files reads a trial's files inside the viewer's folder.
type files struct {
	root *os.Root
	dir  string // the trial folder, relative to the root
}

// open opens a regular file of the trial. Links, pipes and devices are
// refused: a page must neither show a file outside Dir nor block.
func (tf files) open(name string) (*os.File, os.FileInfo, error) {
	p := path.Join(tf.dir, name)
	info, err := tf.root.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := tf.root.Open(p)
	return f, info, err
}

// tail opens a file positioned at most limit bytes before its end, and
// says how many bytes it skipped.
func (tf files) tail(name string, limit int64) (io.ReadCloser, int64, error) {
	f, info, err := tf.open(name)
	if err != nil {
		return nil, 0, err
	}
	skipped := max(0, info.Size()-limit)
	if _, err := f.Seek(skipped, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, skipped, nil
}

// lines calls fn for each whole JSON line of the last maxTailBytes of a
// file, and says what it left out.
func (tf files) lines(name string, fn func([]byte)) (note string) {
	f, skipped, err := tf.tail(name, maxTailBytes)
	if err != nil {
		return ""
	}
	defer f.Close()
	tooLong := eachLine(f, skipped > 0, fn)
	var notes []string
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("the first %d bytes of %s are left out", skipped, name))
	}
	if tooLong > 0 {
		notes = append(notes, fmt.Sprintf("%d lines of %s over %d MiB are left out", tooLong, name, maxLineBytes>>20))
	}
	return strings.Join(notes, "; ")
}

// eachLine calls fn for each line of r; a line over maxLineBytes is
// skipped and counted, and so, when partial, is the first.
func eachLine(r io.Reader, partial bool, fn func([]byte)) (tooLong int) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > maxLineBytes {
				over, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		switch {
		case partial:
			partial = false
		case over:
			tooLong++
		case len(bytes.TrimSpace(line)) > 0:
			fn(line)
		}
		line, over = line[:0], false
		if err != nil {
			return tooLong
		}
	}
}

// shown reads the end of a text file for a page.
func (tf files) shown(name string) string {
	f, skipped, err := tf.tail(name, maxShown)
	if errors.Is(err, os.ErrNotExist) {
		return "(none)"
	}
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, maxShown))
	if skipped > 0 {
		// Start at a whole line (and so at a whole character).
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			skipped += int64(i + 1)
			data = data[i+1:]
		}
		return fmt.Sprintf("… %d bytes before this are left out …\n", skipped) + string(data)
	}
	if len(data) == 0 {
		return "(empty)"
	}
	return string(data)
}

func (tf files) readJSON(name string, v any) {
	f, info, err := tf.open(name)
	if err != nil {
		return
	}
	defer f.Close()
	if info.Size() <= 16<<20 {
		json.NewDecoder(f).Decode(v)
	}
}

// safeID: an agent id that names a folder inside agents/, nothing else.
func safeID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

func (v *Viewer) trial(w http.ResponseWriter, key string) {
	f := v.scan()
	i := slices.IndexFunc(f.trials, func(t *Trial) bool { return v.rel(t.Dir) == key })
	if key == "" || i < 0 {
		http.Error(w, "no such trial under "+v.Dir, http.StatusNotFound)
		return
	}
	t := f.trials[i]
	root, err := os.OpenRoot(v.Dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer root.Close()
	tf := files{root: root, dir: key}
	live := t.Outcome == outcomeRunning

	var full fullResult
	if !live {
		tf.readJSON("result.json", &full)
	}
	var roster []member
	tf.readJSON("relay/members.json", &roster)
	if len(full.Agents) > 0 {
		roster = append(slices.DeleteFunc(roster, func(m member) bool { return m.Kind != "user" }), full.Agents...)
	}
	names := map[string]string{}
	userKnown := false
	for _, m := range roster {
		if m.Kind == "user" {
			names[m.Pubkey], userKnown = "user", true
			continue
		}
		names[m.Pubkey] = fmt.Sprintf("%s (%s)", m.ID, m.Role)
	}
	name := func(pk string) string {
		if n, ok := names[pk]; ok {
			return n
		}
		if !userKnown {
			return "user" // results written before members.json
		}
		return "unknown key " + pk[:min(12, len(pk))]
	}

	var msgs []Message
	transcriptNote := tf.lines("relay/transcript.jsonl", func(line []byte) {
		var rec transcriptLine
		if json.Unmarshal(line, &rec) != nil || rec.Event.Kind != 9 {
			return
		}
		ev := rec.Event
		m := Message{Seq: rec.Seq, Time: rec.ReceivedAt.UTC().Format("15:04:05.000"), From: name(ev.PubKey), Content: ev.Content}
		for _, tag := range ev.Tags {
			if len(tag) >= 2 && tag[0] == "p" {
				m.To = append(m.To, name(tag[1]))
			}
		}
		if strings.HasPrefix(ev.Content, "DONE:") && !live {
			m.Done = full.Done != nil && full.Done.EventID == ev.ID
			m.Ignored = !m.Done
		}
		msgs = append(msgs, m) // at most maxTailBytes of them
	})
	if len(msgs) > maxMessages {
		dropped := len(msgs) - maxMessages
		msgs = slices.Clone(msgs[dropped:])
		transcriptNote = strings.TrimPrefix(transcriptNote+fmt.Sprintf("; the first %d messages read are left out: the last %d are shown", dropped, maxMessages), "; ")
	}

	usage := map[string]RoleUsage{}
	for _, a := range t.Agents {
		usage[a.ID] = RoleUsage(a.Usage)
	}
	var agents []agentView
	for _, m := range roster {
		if m.Kind == "user" {
			continue
		}
		av := agentView{ID: m.ID, Role: m.Role, Kind: m.Kind}
		if !safeID(m.ID) {
			av.Log = "(an agent id that is not a folder name: nothing is read for it)"
			agents = append(agents, av)
			continue
		}
		dir := "agents/" + m.ID + "/"
		av.CallsNote = tf.lines(dir+"llm-calls.jsonl", func(line []byte) {
			var c Call
			if json.Unmarshal(line, &c) != nil {
				return
			}
			if ts, err := time.Parse(time.RFC3339Nano, c.RawTime); err == nil {
				c.Time = ts.UTC().Format("15:04:05.000")
			}
			av.Total.Calls++
			av.Total.InputTokens += c.InputTokens
			av.Total.CachedTokens += c.CachedTokens
			av.Total.OutputTokens += c.OutputTokens
			av.Total.CostUSD += c.CostUSD
			if len(av.Calls) < maxCallsPerPage {
				av.Calls = append(av.Calls, c)
			}
		})
		if u, ok := usage[m.ID]; ok {
			av.Total = u // the gateway's own count, whatever the page read
		}
		if int(av.Total.Calls) > len(av.Calls) && av.CallsNote == "" {
			av.CallsNote = fmt.Sprintf("the first %d calls are shown", len(av.Calls))
		}
		av.Log, av.Stdout = tf.shown(dir+"stderr.log"), tf.shown(dir+"stdout.log")
		agents = append(agents, av)
	}
	exception := ""
	if full.Exception != nil {
		exception = full.Exception.Type + ": " + full.Exception.Message
	}
	render(w, "trial", map[string]any{
		"Title": t.Name, "Running": live, "T": t, "Messages": msgs, "TranscriptNote": transcriptNote, "Agents": agents,
		"Verifier": tf.shown("verifier/test-stdout.txt"), "VerifierErr": tf.shown("verifier/test-stderr.txt"),
		"TrialLog": tf.shown("trial.log"), "Exception": exception,
	})
}

// fullResult is what the trial page reads beyond Trial.
type fullResult struct {
	Agents []member `json:"agents"`
	Done   *struct {
		EventID string `json:"event_id"`
	} `json:"done"`
	Exception *struct {
		Type    string `json:"exception_type"`
		Message string `json:"exception_message"`
	} `json:"exception_info"`
}

type transcriptLine struct {
	Seq        int       `json:"seq"`
	ReceivedAt time.Time `json:"received_at"`
	Event      struct {
		ID      string     `json:"id"`
		Kind    int        `json:"kind"`
		PubKey  string     `json:"pubkey"`
		Tags    [][]string `json:"tags"`
		Content string     `json:"content"`
	} `json:"event"`
}
