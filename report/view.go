package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Viewer is troupe view: a read-only web UI over the job folders under
// Dir. Every page reads the folders again, so a running job shows its
// progress; pages of a running job refresh themselves. It serves only what
// Load finds (trial folders are addressed by their path under Dir, looked
// up among them), never an arbitrary file.
type Viewer struct {
	Dir string
}

var viewPages = template.Must(template.New("view").Funcs(funcs).Funcs(template.FuncMap{
	"deref": func(p *float64) float64 { return *p },
}).ParseFS(templateFS, "templates/parts.html", "templates/view.html"))

func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

// render executes a page into a buffer first, so an error is a clean 500.
func render(w http.ResponseWriter, page string, data any) {
	var buf bytes.Buffer
	if err := viewPages.ExecuteTemplate(&buf, page, data); err != nil {
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(buf.Bytes())
}

type jobRow struct {
	Name                          string
	Trials, Passed, Failed, Other int
	Running                       bool
}

type trialRow struct {
	Key string
	T   *Trial
}

func (v *Viewer) index(w http.ResponseWriter) {
	trials, err := Load(v.Dir)
	if err != nil && len(trials) == 0 {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	c, cerr := Compare(trials, "")
	if cerr != nil {
		http.Error(w, cerr.Error(), http.StatusInternalServerError)
		return
	}
	jobs := map[string]*jobRow{}
	var rows []trialRow
	for _, t := range trials {
		j := jobs[t.Job]
		if j == nil {
			j = &jobRow{Name: v.rel(t.Job), Running: jobRunning(t.Job)}
			jobs[t.Job] = j
		}
		j.Trials++
		switch t.Outcome {
		case passed:
			j.Passed++
		case failed:
			j.Failed++
		default:
			j.Other++
		}
		rows = append(rows, trialRow{Key: v.rel(t.Dir), T: t})
	}
	var jobList []*jobRow
	running := false
	for _, j := range jobs {
		jobList = append(jobList, j)
		running = running || j.Running
	}
	slices.SortFunc(jobList, func(a, b *jobRow) int { return strings.Compare(a.Name, b.Name) })
	render(w, "index", map[string]any{
		"Title": v.Dir, "Dir": v.Dir, "Running": running, "Jobs": jobList, "Trials": rows, "C": c,
		"PassRate": template.HTML(passRateChart(c)), "Pareto": template.HTML(paretoChart(c)), "Grid": template.HTML(gridChart(c)),
	})
}

// jobRunning: a job whose result.json has no finished_at is running (or
// was interrupted; either way it may change).
func jobRunning(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
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
	Log            string
}

const maxShown = 256 << 10 // of a log or verifier output

func (v *Viewer) trial(w http.ResponseWriter, key string) {
	trials, _ := Load(v.Dir)
	i := slices.IndexFunc(trials, func(t *Trial) bool { return v.rel(t.Dir) == key })
	if key == "" || i < 0 {
		http.Error(w, "no such trial under "+v.Dir, http.StatusNotFound)
		return
	}
	t := trials[i]
	full := readFullResult(t.Dir)
	names := map[string]string{}
	orchestrator := ""
	for _, a := range full.Agents {
		names[a.Pubkey] = fmt.Sprintf("%s (%s)", a.ID, a.Role)
		if a.Kind == "orchestrator" && orchestrator == "" {
			orchestrator = a.Pubkey
		}
	}
	name := func(pk string) string {
		if n, ok := names[pk]; ok {
			return n
		}
		return "user"
	}
	var msgs []Message
	for _, rec := range readTranscript(filepath.Join(t.Dir, "relay", "transcript.jsonl")) {
		ev := rec.Event
		if ev.Kind != 9 {
			continue
		}
		m := Message{Seq: rec.Seq, Time: rec.ReceivedAt.Format("15:04:05.000"), From: name(ev.PubKey), Content: ev.Content}
		for _, tag := range ev.Tags {
			if len(tag) >= 2 && tag[0] == "p" {
				m.To = append(m.To, name(tag[1]))
			}
		}
		if strings.HasPrefix(ev.Content, "DONE:") {
			m.Done = full.Done != nil && full.Done.EventID == ev.ID
			m.Ignored = !m.Done
		}
		msgs = append(msgs, m)
	}
	var agents []agentView
	for _, a := range full.Agents {
		dir := filepath.Join(t.Dir, "agents", a.ID)
		agents = append(agents, agentView{ID: a.ID, Role: a.Role, Kind: a.Kind, Calls: readCalls(filepath.Join(dir, "llm-calls.jsonl")), Log: readShown(filepath.Join(dir, "stderr.log"))})
	}
	exception := ""
	if full.Exception != nil {
		exception = full.Exception.Type + ": " + full.Exception.Message
	}
	render(w, "trial", map[string]any{
		"Title": t.Name, "Running": jobRunning(t.Job) && t.FinishedAt.IsZero(), "T": t, "Messages": msgs, "Agents": agents,
		"Verifier": readShown(filepath.Join(t.Dir, "verifier", "test-stdout.txt")), "Exception": exception,
	})
}

// fullResult is what the trial page reads beyond Trial.
type fullResult struct {
	Agents []struct {
		ID, Role, Kind, Pubkey string
	} `json:"agents"`
	Done *struct {
		EventID string `json:"event_id"`
	} `json:"done"`
	Exception *struct {
		Type    string `json:"exception_type"`
		Message string `json:"exception_message"`
	} `json:"exception_info"`
}

func readFullResult(dir string) fullResult {
	var r fullResult
	if data, err := os.ReadFile(filepath.Join(dir, "result.json")); err == nil {
		json.Unmarshal(data, &r)
	}
	return r
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

func readTranscript(path string) []transcriptLine {
	var out []transcriptLine
	eachLine(path, func(line []byte) {
		var l transcriptLine
		if json.Unmarshal(line, &l) == nil {
			out = append(out, l)
		}
	})
	return out
}

func readCalls(path string) []Call {
	var out []Call
	eachLine(path, func(line []byte) {
		var c Call
		if json.Unmarshal(line, &c) == nil {
			if t, err := time.Parse(time.RFC3339Nano, c.RawTime); err == nil {
				c.Time = t.Format("15:04:05.000")
			}
			out = append(out, c)
		}
	})
	return out
}

func eachLine(path string, fn func([]byte)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
}

// readShown reads the end of a text file for a page.
func readShown(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(none)"
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	skipped := ""
	if info.Size() > maxShown {
		f.Seek(info.Size()-maxShown, io.SeekStart)
		skipped = fmt.Sprintf("… %d bytes before this are left out …\n", info.Size()-maxShown)
	}
	data, _ := io.ReadAll(io.LimitReader(f, maxShown))
	if len(data) == 0 {
		return "(empty)"
	}
	return skipped + string(data)
}
