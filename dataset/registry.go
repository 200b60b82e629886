package dataset

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/suggest"
)

// DefaultRegistry is Harbor's registry, the one `harbor run -d NAME@VERSION`
// reads when given no other (Harbor 0.13's DEFAULT_REGISTRY_URL; Harbor
// serves the same file from its database, synced from it).
const DefaultRegistry = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"

// maxRegistryBytes bounds a registry read; Harbor's is a few MiB.
const maxRegistryBytes = 64 << 20

// Registry is a list of datasets, as read from Source.
type Registry struct {
	// Source is the file or URL the registry was read from; it names the
	// registry in messages.
	Source   string
	Datasets []*Dataset
}

// Dataset is one version of a named dataset.
type Dataset struct {
	Name, Version, Description string
	Tasks                      []TaskRef
}

// Ref is the dataset's name@version.
func (d *Dataset) Ref() string { return d.Name + "@" + d.Version }

// TaskRef names a task folder in a git repository: Path at GitCommit of
// GitURL. Harbor allows GitURL and GitCommit to be empty (a local path; the
// default branch's head); troupe fetches pinned commits only (Check).
type TaskRef struct {
	Name      string `json:"name"`
	GitURL    string `json:"git_url,omitempty"`
	GitCommit string `json:"git_commit_id,omitempty"`
	Path      string `json:"path"`
}

// ErrNotFound is the condition of a *NotFoundError.
var ErrNotFound = errors.New("dataset not found")

// NotFoundError says that a registry has no dataset of that name, or not in
// that version, and what it has instead.
type NotFoundError struct {
	Registry, Name, Version string
	// Close are the registry's names that look like Name, when Name is
	// unknown; closest first.
	Close []string
	// Versions are the versions of Name, when Name is known and Version is
	// not; oldest first.
	Versions []string
}

func (e *NotFoundError) Error() string {
	if len(e.Versions) > 0 {
		return fmt.Sprintf("dataset %s has no version %q in %s; it has %s", e.Name, e.Version, e.Registry, strings.Join(e.Versions, ", "))
	}
	msg := fmt.Sprintf("no dataset is named %q in %s", e.Name, e.Registry)
	if len(e.Close) > 0 {
		return msg + "; did you mean " + strings.Join(e.Close, ", ") + "?"
	}
	return msg + "; troupe datasets list shows the datasets it has"
}

func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Load reads a registry from a file path, a file:// URL, or an http(s) URL
// (with client; nil is http.DefaultClient), and parses it.
func Load(ctx context.Context, source string, client *http.Client) (*Registry, error) {
	var data []byte
	var err error
	switch {
	case strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://"):
		data, err = download(ctx, source, cmp.Or(client, http.DefaultClient))
	default:
		data, err = readFile(strings.TrimPrefix(source, "file://"))
	}
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", source, err)
	}
	return Parse(source, data)
}

func download(ctx context.Context, url string, client *http.Client) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET: %s", resp.Status)
	}
	return readLimited(resp.Body)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRegistryBytes+1))
	if err == nil && len(data) > maxRegistryBytes {
		err = fmt.Errorf("larger than %d MiB", maxRegistryBytes>>20)
	}
	return data, err
}

// Parse reads a registry in Harbor's format: a JSON list of datasets, each
// {name, version, description, tasks: [{name, git_url, git_commit_id,
// path}], metrics}. Keys Harbor ignores are ignored (metrics among them:
// troupe's report computes its own). Every problem is returned, each a
// *located.Error in source at its line and column (in bytes), in the
// order found; past maxProblems, a last line says how many more there are.
func Parse(source string, data []byte) (*Registry, error) {
	p := &parser{source: source, data: data}
	reg := &Registry{Source: source}
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		off := 0
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			off = int(se.Offset)
		}
		p.add(off, "%s", strings.TrimPrefix(err.Error(), "json: "))
		return nil, p.err()
	}
	items, ok := p.array(0, data, "the registry must be a JSON list of datasets")
	if !ok {
		return nil, p.err()
	}
	seen := map[string]bool{}
	for _, it := range items {
		d, ok := p.dataset(it)
		if !ok {
			continue
		}
		if seen[d.Ref()] {
			p.add(it.off, "%s is listed twice", d.Ref())
			continue
		}
		seen[d.Ref()] = true
		reg.Datasets = append(reg.Datasets, d)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return reg, nil
}

// parser collects located problems.
type parser struct {
	source string
	data   []byte
	errs   []error
}

// maxProblems bounds what Parse reports; a file of the wrong kind would
// otherwise fill the screen.
const maxProblems = 20

func (p *parser) add(off int, format string, args ...any) {
	line, col := position(p.data, off)
	p.errs = append(p.errs, &located.Error{File: p.source, Line: line, Col: col, Err: fmt.Errorf(format, args...)})
}

func (p *parser) err() error {
	if len(p.errs) > maxProblems {
		more := len(p.errs) - maxProblems
		return errors.Join(append(p.errs[:maxProblems:maxProblems], fmt.Errorf("%s: and %d more problems", p.source, more))...)
	}
	return errors.Join(p.errs...)
}

// item is a JSON value and its offset in the whole document.
type item struct {
	raw json.RawMessage
	off int
}

// member is an object's member: its key and value.
type member struct {
	key string
	item
}

// array returns the elements of a JSON list found at off, or adds the
// problem and returns false.
func (p *parser) array(off int, raw []byte, problem string) ([]item, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		p.add(off+skipSpace(raw, 0), "%s", problem)
		return nil, false
	}
	var out []item
	for dec.More() {
		start := skipSpace(raw, int(dec.InputOffset()))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			// The document is valid JSON: this cannot happen.
			p.add(off+start, "%v", err)
			return out, false
		}
		out = append(out, item{raw: v, off: off + start})
	}
	return out, true
}

// object returns the members of a JSON object, or adds the problem and
// returns false.
func (p *parser) object(it item, problem string) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(it.raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		p.add(it.off, "%s", problem)
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			p.add(it.off, "%s", problem)
			return out, false
		}
		start := skipSpace(it.raw, int(dec.InputOffset()))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.add(it.off+start, "%v", err)
			return out, false
		}
		out = append(out, member{key: key, item: item{raw: v, off: it.off + start}})
	}
	return out, true
}

// str reads a string member; null is "", as Harbor's optional fields
// allow.
func (p *parser) str(m member, where string) (string, bool) {
	if string(m.raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(m.raw, &s); err != nil {
		p.add(m.off, "%s%s must be a string, found %s", where, m.key, kind(m.raw))
		return "", false
	}
	return s, true
}

func (p *parser) dataset(it item) (*Dataset, bool) {
	const problem = "a dataset must be an object {name, version, description, tasks}"
	members, ok := p.object(it, problem)
	if !ok {
		return nil, false
	}
	d := &Dataset{}
	var tasks *member
	ok = true
	for _, m := range members {
		var good bool
		switch m.key {
		case "name":
			d.Name, good = p.str(m, "")
		case "version":
			d.Version, good = p.str(m, "")
		case "description":
			d.Description, good = p.str(m, "")
		case "tasks":
			tasks, good = &m, true
		default:
			good = true // Harbor ignores other keys too (metrics, …)
		}
		ok = ok && good
	}
	switch {
	case d.Name == "":
		p.add(it.off, "a dataset has no name")
		return nil, false
	case strings.Contains(d.Name, "@"):
		p.add(it.off, "dataset %q: a name cannot hold @, which separates name@version", d.Name)
		ok = false
	}
	if d.Version == "" {
		p.add(it.off, "dataset %s has no version", d.Name)
		ok = false
	}
	where := fmt.Sprintf("dataset %s: ", d.Ref())
	if tasks == nil || string(tasks.raw) == "null" {
		p.add(it.off, "%sno tasks list", where)
		return nil, false
	}
	items, good := p.array(tasks.off, tasks.raw, where+"tasks must be a list of {name, git_url, git_commit_id, path}")
	if !good {
		return nil, false
	}
	for i, t := range items {
		ref, good := p.task(t, fmt.Sprintf("%stask %d: ", where, i+1))
		ok = ok && good
		d.Tasks = append(d.Tasks, ref)
	}
	return d, ok
}

func (p *parser) task(it item, where string) (TaskRef, bool) {
	var t TaskRef
	members, ok := p.object(it, where+"a task must be an object {name, git_url, git_commit_id, path}")
	if !ok {
		return t, false
	}
	for _, m := range members {
		var good bool
		switch m.key {
		case "name":
			t.Name, good = p.str(m, where)
		case "git_url":
			t.GitURL, good = p.str(m, where)
		case "git_commit_id":
			t.GitCommit, good = p.str(m, where)
		case "path":
			t.Path, good = p.str(m, where)
		default:
			good = true
		}
		ok = ok && good
	}
	if t.Name == "" {
		p.add(it.off, "%sno name", where)
		ok = false
	}
	if t.Path == "" {
		p.add(it.off, "%sno path", where)
		ok = false
	}
	return t, ok
}

// kind names a JSON value's type for a message.
func kind(raw []byte) string {
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "a list"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '"':
		return "a string"
	default:
		return "the number " + string(raw)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && strings.IndexByte(" \t\r\n,:", b[i]) >= 0 {
		i++
	}
	return i
}

// position turns a byte offset into a line and a column (in bytes), from 1.
func position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, off - bytes.LastIndexByte(before, '\n')
}

// ParseRef splits "name@version"; "name" alone has version "".
func ParseRef(ref string) (name, version string, err error) {
	name, version, hasVersion := strings.Cut(ref, "@")
	switch {
	case name == "":
		return "", "", fmt.Errorf("%q: give a dataset as NAME@VERSION (troupe datasets list shows them)", ref)
	case hasVersion && version == "":
		return "", "", fmt.Errorf("%q: no version after @ (give NAME@VERSION, or NAME for its newest)", ref)
	}
	return name, version, nil
}

// Lookup finds a dataset by "name@version", or by "name" alone: then the
// version "head" if there is one, else the highest release, as Harbor
// resolves it (CompareVersions).
func (r *Registry) Lookup(ref string) (*Dataset, error) {
	name, version, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	var versions []*Dataset
	for _, d := range r.Datasets {
		if d.Name == name {
			versions = append(versions, d)
		}
	}
	if len(versions) == 0 {
		return nil, &NotFoundError{Registry: r.Source, Name: name, Version: version, Close: r.closeNames(name)}
	}
	if version == "" {
		return slices.MaxFunc(versions, func(a, b *Dataset) int { return CompareVersions(a.Version, b.Version) }), nil
	}
	for _, d := range versions {
		if d.Version == version {
			return d, nil
		}
	}
	var have []string
	for _, d := range versions {
		have = append(have, d.Version)
	}
	slices.SortFunc(have, CompareVersions)
	return nil, &NotFoundError{Registry: r.Source, Name: name, Version: version, Versions: have}
}

// release is a version of dotted numbers, as PEP 440 writes a release; other
// versions (pre-releases, names) rank below every release. Harbor ranks by
// PEP 440 whatever it parses; troupe's rule agrees on the versions Harbor's
// registry has (head, 1.0, 2.0, parity, …).
var release = regexp.MustCompile(`^[vV]?\d+(\.\d+)*$`)

// CompareVersions orders a dataset's versions, for slices.SortFunc: the one
// Harbor picks when none is given is the largest: "head", then the highest release (1.10 above 1.9),
// then anything else in lexical order.
func CompareVersions(a, b string) int {
	rank := func(v string) int {
		switch {
		case v == "head":
			return 2
		case release.MatchString(v):
			return 1
		}
		return 0
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return cmp.Compare(ra, rb)
	} else if ra == 1 {
		pa := strings.Split(strings.TrimLeft(a, "vV"), ".")
		pb := strings.Split(strings.TrimLeft(b, "vV"), ".")
		for i := range max(len(pa), len(pb)) {
			if c := cmp.Compare(part(pa, i), part(pb, i)); c != 0 {
				return c
			}
		}
	}
	// 1.0 and 1.0.0 are one release for PEP 440; keep an order anyway.
	return strings.Compare(a, b)
}

func part(parts []string, i int) uint64 {
	if i >= len(parts) {
		return 0
	}
	n, err := strconv.ParseUint(parts[i], 10, 64)
	if err != nil {
		return ^uint64(0) // beyond uint64: the largest
	}
	return n
}

// closeNames are the registry's dataset names that look like name: within a
// few edits of it, or holding it; closest first, at most five.
func (r *Registry) closeNames(name string) []string {
	type scored struct {
		name string
		d    int
	}
	var found []scored
	seen := map[string]bool{}
	lower := strings.ToLower(name)
	for _, d := range r.Datasets {
		if seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		other := strings.ToLower(d.Name)
		dist := suggest.Distance(lower, other)
		if dist <= max(2, len(lower)/3) || strings.Contains(other, lower) || strings.Contains(lower, other) {
			found = append(found, scored{d.Name, dist})
		}
	}
	slices.SortFunc(found, func(a, b scored) int { return cmp.Or(cmp.Compare(a.d, b.d), strings.Compare(a.name, b.name)) })
	var out []string
	for _, s := range found[:min(len(found), 5)] {
		out = append(out, s.name)
	}
	return out
}
