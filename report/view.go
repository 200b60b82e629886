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
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/troupebench/troupe/trial/outcome"
	"github.com/troupebench/troupe/trialdir"
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
	"deref":      func(p *float64) float64 { return *p },
	"cutSummary": cutSummary,
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
	q := r.URL.Query()
	switch r.URL.Path {
	case "/":
		v.index(w, q.Get("baseline"))
	case "/trial":
		v.trial(w, q.Get("t"), q.Get("baseline"))
	case "/conversation":
		v.conversation(w, q.Get("t"), q.Get("agent"), q.Get("baseline"))
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

// A running trial has a config.json and no result.json yet: the viewer
// shows it with this outcome of its own, which no result holds.
const outcomeRunning outcome.Outcome = "running"

// found is what one scan of Dir finds.
type found struct {
	trials []*Trial // finished and running, in Load's order
	redone []*Trial // runs the jobs redid: their cost counts
	jobs   []string // folders holding a job's lock.json
	errs   []error
}

// scan finds the trials under Dir, finished or not, and the job folders.
func (v *Viewer) scan() found {
	var f found
	err := walkFolders(v.Dir, func(dir string) bool {
		if _, err := os.Lstat(filepath.Join(dir, trialdir.JobLock)); err == nil {
			f.jobs = append(f.jobs, dir)
		}
		t, err := readTrial(filepath.Join(dir, trialdir.Result))
		if err != nil {
			f.errs = append(f.errs, err)
			return false
		}
		if t == nil {
			t = readRunning(dir)
		}
		if t != nil {
			f.trials = append(f.trials, t)
		} else {
			f.redone = append(f.redone, redoneRuns(dir)...)
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
	data, info, err := readRegular(filepath.Join(dir, trialdir.Config))
	if data == nil || err != nil {
		return nil
	}
	c, err := trialdir.DecodeStart(bytes.NewReader(data))
	if err != nil || c.TrialName == "" || c.TaskName == "" {
		return nil
	}
	return &Trial{Dir: dir, Job: filepath.Dir(dir), TrialResult: trialdir.TrialResult{TrialName: c.TrialName, TaskName: c.TaskName, Attempt: c.Attempt,
		Condition: c.Condition, ManifestHash: c.ManifestHash, TaskChecksum: c.TaskChecksum,
		Outcome: outcomeRunning, StartedAt: info.ModTime()}}
}

type jobRow struct {
	Name                                   string
	Trials, Passed, Failed, Other, Running int
	JobRunning                             bool
}

type trialRow struct {
	Href string
	T    *Trial
}

// baselineLink is one condition the user can compare the others with.
type baselineLink struct {
	Name, Href string
	Current    bool
}

// withBaseline is a page's address with the chosen baseline kept in its
// query, so that following a link does not lose the choice.
func withBaseline(path string, q url.Values, baseline string) string {
	if baseline != "" {
		q.Set("baseline", baseline)
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func (v *Viewer) index(w http.ResponseWriter, baseline string) {
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
	for _, t := range f.trials {
		j := job(t.Job)
		j.Trials++
		switch t.Outcome {
		case outcome.Passed:
			j.Passed++
		case outcome.Failed:
			j.Failed++
		case outcomeRunning:
			j.Running++
		default:
			j.Other++
		}
		if t.Outcome != outcomeRunning {
			finished = append(finished, t)
		}
	}
	running := false
	var jobList []*jobRow
	for _, j := range jobs {
		jobList = append(jobList, j)
		running = running || j.JobRunning || j.Running > 0
	}
	slices.SortFunc(jobList, func(a, b *jobRow) int { return strings.Compare(a.Name, b.Name) })
	c, baseline, baselineErr := compareWith(append(finished, f.redone...), baseline)
	c.Skipped = Skipped(errors.Join(f.errs...))
	seq, seqErr := LoadSequential(v.Dir)
	c.ApplySequential(seq)
	var problems []string
	for _, e := range f.errs {
		if _, ok := errors.AsType[*UnreadableError](e); !ok {
			problems = append(problems, e.Error())
		}
	}
	if baselineErr != nil {
		problems = append(problems, baselineErr.Error()+"; compared with "+c.Baseline+", the first by name")
	}
	if seqErr != nil {
		problems = append(problems, seqErr.Error())
	}
	var rows []trialRow
	for _, t := range f.trials {
		rows = append(rows, trialRow{Href: withBaseline("/trial", url.Values{"t": {v.rel(t.Dir)}}, baseline), T: t})
	}
	var links []baselineLink
	for _, cd := range c.Conditions {
		links = append(links, baselineLink{Name: cd.Name, Href: withBaseline("/", url.Values{}, cd.Name) + "#comparison", Current: cd.Name == c.Baseline})
	}
	data := chartData(c)
	for k, val := range map[string]any{
		"Title": v.Dir, "Dir": v.Dir, "Running": running, "Jobs": jobList, "Trials": rows, "Problems": problems,
		"Baselines": links, "Home": withBaseline("/", url.Values{}, baseline),
	} {
		data[k] = val
	}
	render(w, "index", data)
}

// compareWith compares against the baseline the user chose, or the first
// condition by name. A choice that names no condition (an old link) is not
// an error page: the comparison is shown against the first, and the error
// says why; the baseline returned is the choice to keep in links, "" then.
func compareWith(trials []*Trial, baseline string) (*Comparison, string, error) {
	if baseline != "" {
		c, err := Compare(trials, baseline)
		if err == nil {
			return c, baseline, nil
		}
		c, _ = Compare(trials, "")
		return c, "", fmt.Errorf("baseline: %w", err)
	}
	c, err := Compare(trials, "")
	return c, "", err
}

// jobRunning: a job whose result.json has no finished_at is running (or
// was interrupted; either way it may change).
func jobRunning(dir string) bool {
	data, _, err := readRegular(filepath.Join(dir, trialdir.JobResult))
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

// files reads a trial's files inside the viewer's folder.
type files struct {
	root *os.Root
	dir  string // the trial folder, relative to the root
	// cut names the text logs whose markers are troupe's: those the
	// result says were cut. An agent writes its own logs byte for byte
	// and could print a line that looks like a marker anywhere else.
	cut map[string]bool
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
// file, with cut set instead for the marker where troupe dropped the
// file's middle when it wrote it, and says what was left out. The error is
// the file's: absent, or not a regular file.
func (tf files) lines(name string, fn func(line []byte, cut *Cut)) (note string, err error) {
	f, skipped, err := tf.tail(name, maxTailBytes)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var dropped, cuts int64
	tooLong := eachLine(f, skipped > 0, func(line []byte) {
		if c := jsonlCut(line); c != nil {
			dropped += c.DroppedBytes
			cuts++
			fn(nil, c)
			return
		}
		fn(line, nil)
	})
	var notes []string
	if cuts > 0 {
		notes = append(notes, fmt.Sprintf("%d bytes of %s were dropped when troupe wrote it (marked where)", dropped, name))
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("the first %d bytes of %s are left out", skipped, name))
	}
	if tooLong > 0 {
		notes = append(notes, fmt.Sprintf("%d lines of %s over %d MiB are left out", tooLong, name, maxLineBytes>>20))
	}
	return strings.Join(notes, "; "), nil
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

// shown reads the end of a text file for a page, its markers of dropped
// lines apart when troupe cut it (files.cut).
func (tf files) shown(name string) []logPart {
	text := tf.text(name)
	if !tf.cut[name] {
		return []logPart{{Text: text}}
	}
	return splitCuts(text)
}

// text reads the end of a text file for a page.
func (tf files) text(name string) string {
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

// readMembers reads relay/members.json with the roster's reader, within
// the bound of a result; none when it cannot be read.
func (tf files) readMembers() []member {
	f, info, err := tf.open(trialdir.Members)
	if err != nil {
		return nil
	}
	defer f.Close()
	if info.Size() > trialdir.MaxResult {
		return nil
	}
	members, _ := trialdir.ReadMembers(f)
	return members
}
