// Package yamlpin rewrites the pins of a YAML file in its text. A pin is a
// mapping with a path and its digest ({path: lead.md, sha256: …}); only
// the digests change (a missing one is added beside its path), so
// comments, quoting, order and layout stay, and the rewritten text is read
// again and compared with the original before anyone writes it. troupe pin
// rewrites a manifest's pins with it, troupe stacks pin a stack's.
package yamlpin

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/yaml11"
)

// Site is one pin of a document: the mapping at Key, with its path and
// (when the key is there) its sha256.
type Site struct {
	// Key is the mapping's key path, such as roster[0].prompt.
	Key              string
	ref, path, hash  *yaml11.Node // hash is nil when the key is missing
	pathKey, hashKey *yaml11.Node
}

// Path is the pinned path as the document writes it.
func (s Site) Path() string { return s.path.Text }

// Digest is the pinned digest as the document writes it, "" when it has
// none (no sha256 key, an empty value, or one that is not a string).
func (s Site) Digest() string {
	if s.hash != nil && s.hash.Kind == yaml11.String {
		return s.hash.Text
	}
	return ""
}

// NewSite reads n, the value at key, as a pin. A null or missing value is
// no pin (false, no problem); anything but a mapping with a string path is
// a problem, recorded in d.
func NewSite(d *yaml11.Decoder, n *yaml11.Node, key string) (Site, bool) {
	if yaml11.IsNull(n) {
		return Site{}, false
	}
	if n.Kind != yaml11.Map {
		d.Errorf(n, key, "must be a mapping with path and sha256 to be pinned")
		return Site{}, false
	}
	s := Site{Key: key, ref: n}
	for _, p := range n.Pairs {
		switch p.Key.Text {
		case "path":
			s.path, s.pathKey = p.Value, p.Key
		case "sha256":
			s.hash, s.hashKey = p.Value, p.Key
		}
	}
	if s.path == nil || s.path.Kind != yaml11.String || s.path.Text == "" {
		d.Errorf(n, yaml11.Key(key, "path"), "needs a path to be pinned")
		return Site{}, false
	}
	return s, true
}

// Finder finds a document's pins; file names it in problems.
type Finder func(file string, root *yaml11.Node) ([]Site, error)

// Change is one digest Rewrite sets: a stale or missing pin and the
// digest of its file now.
type Change struct {
	Key       string // the pin's key path, e.g. roster[0].prompt
	Path      string // the pinned path, as written
	Line, Col int    // where the digest is (or goes)
	Old, New  string // Old is "" when there was no digest
}

// Rewrite returns the document with the digest of every pin find finds
// set to what sum says of it, and the pins it changed. A pin reached
// twice through an alias is changed once. A problem of sum is located at
// the pin's path; when there is any, nothing is returned but every
// problem, as a located.List. A byte order mark and CRLF line ends stay.
func Rewrite(file string, data []byte, find Finder, sum func(Site) (string, error)) ([]byte, []Change, error) {
	bom := []byte("\ufeff")
	hasBOM := bytes.HasPrefix(data, bom)
	body := bytes.TrimPrefix(data, bom)
	root, err := yaml11.Parse(file, body)
	if err != nil {
		return nil, nil, located.List{err.(*located.Error)}
	}
	sites, err := find(file, root)
	if err != nil {
		return nil, nil, err
	}
	d := yaml11.Decoder{File: file}
	text := newSource(body)
	var edits []edit
	var changes []Change
	seen := map[*yaml11.Node]bool{}
	for _, s := range sites {
		if seen[s.ref] { // an alias: the anchored mapping is edited once
			continue
		}
		seen[s.ref] = true
		digest, err := sum(s)
		if err != nil {
			d.Errorf(s.path, yaml11.Key(s.Key, "path"), "%w", err)
			continue
		}
		old := s.Digest()
		if old == digest {
			continue
		}
		e, line, col, err := text.pinEdit(s, digest)
		if err != nil {
			d.Errorf(s.hash, yaml11.Key(s.Key, "sha256"), "%w", err)
			continue
		}
		edits = append(edits, e)
		changes = append(changes, Change{Key: s.Key, Path: s.path.Text, Line: line, Col: col, Old: old, New: digest})
	}
	if err := d.Err(); err != nil {
		return nil, nil, err
	}
	out := text.apply(edits)
	if err := sameExceptPins(file, body, out, find); err != nil {
		return nil, nil, err
	}
	if hasBOM {
		out = append(bom, out...)
	}
	return out, changes, nil
}

// source maps the parser's line and character columns to byte offsets.
type source struct {
	data       []byte
	lineStarts []int
	newline    string
}

func newSource(data []byte) *source {
	s := &source{data: data, lineStarts: []int{0}, newline: "\n"}
	for i, c := range data {
		if c == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	if bytes.Contains(data, []byte("\r\n")) {
		s.newline = "\r\n"
	}
	return s
}

// offset is the byte offset of a 1-based line and character column.
func (s *source) offset(line, col int) (int, bool) {
	if line < 1 || line > len(s.lineStarts) {
		return 0, false
	}
	off := s.lineStarts[line-1]
	for range col - 1 {
		if off >= len(s.data) || s.data[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(s.data[off:])
		off += size
	}
	return off, true
}

type edit struct {
	at, remove int
	insert     string
}

func (s *source) apply(edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return b.at - a.at })
	out := slices.Clone(s.data)
	for _, e := range edits {
		out = slices.Concat(out[:e.at], []byte(e.insert), out[e.at+e.remove:])
	}
	return out
}

// literal is a new digest as YAML text: quoted when it holds a colon
// (sha256:…), which a plain scalar in a flow mapping could not.
func literal(sum string) string {
	if strings.ContainsAny(sum, ":#") {
		return strconv.Quote(sum)
	}
	return sum
}

// pinEdit computes the text change that sets one digest, and where it is.
func (s *source) pinEdit(site Site, sum string) (edit, int, int, error) {
	if site.hash != nil && yaml11.IsNull(site.hash) && site.hash.Text == "" {
		// "sha256:" with nothing after it: the digest goes after the colon.
		keyAt, ok := s.offset(site.hashKey.Line, site.hashKey.Col)
		colon := bytes.IndexByte(s.data[keyAt:], ':')
		if !ok || colon < 0 {
			return edit{}, 0, 0, fmt.Errorf("cannot find the sha256 key's text at line %d, column %d", site.hashKey.Line, site.hashKey.Col)
		}
		at := keyAt + colon + 1
		if at < len(s.data) && s.data[at] == ' ' {
			return edit{at: at + 1, insert: literal(sum)}, site.hashKey.Line, site.hashKey.Col, nil
		}
		return edit{at: at, insert: " " + literal(sum)}, site.hashKey.Line, site.hashKey.Col, nil
	}
	if site.hash != nil {
		at, ok := s.offset(site.hash.Line, site.hash.Col)
		if !ok {
			return edit{}, 0, 0, fmt.Errorf("cannot find the digest's text at line %d, column %d", site.hash.Line, site.hash.Col)
		}
		n, quote, err := s.scalarSpan(at)
		if err != nil {
			return edit{}, 0, 0, err
		}
		insert := quote + sum + quote
		if quote == "" {
			insert = literal(sum)
		}
		return edit{at: at, remove: n, insert: insert}, site.hash.Line, site.hash.Col, nil
	}
	// No sha256 key: add one after the path value.
	pathAt, ok := s.offset(site.path.Line, site.path.Col)
	if !ok {
		return edit{}, 0, 0, fmt.Errorf("cannot find the path's text at line %d, column %d", site.path.Line, site.path.Col)
	}
	n, _, err := s.scalarSpan(pathAt)
	if err != nil {
		return edit{}, 0, 0, err
	}
	refAt, _ := s.offset(site.ref.Line, site.ref.Col)
	if s.data[refAt] == '{' {
		return edit{at: pathAt + n, insert: ", sha256: " + literal(sum)}, site.path.Line, site.path.Col, nil
	}
	lineEnd := pathAt + n
	for lineEnd < len(s.data) && s.data[lineEnd] != '\n' && s.data[lineEnd] != '\r' {
		lineEnd++
	}
	indent := strings.Repeat(" ", site.pathKey.Col-1)
	return edit{at: lineEnd, insert: s.newline + indent + "sha256: " + literal(sum)}, site.path.Line + 1, site.pathKey.Col, nil
}

// scalarSpan measures a one-line scalar starting at a byte offset and says
// which quote it uses. Digests are one line; anything else is refused.
func (s *source) scalarSpan(at int) (int, string, error) {
	d := s.data
	if at >= len(d) {
		return 0, "", fmt.Errorf("the value is missing")
	}
	switch q := d[at]; q {
	case '"', '\'':
		for i := at + 1; i < len(d) && d[i] != '\n'; i++ {
			switch {
			case q == '"' && d[i] == '\\':
				i++
			case q == '\'' && d[i] == '\'' && i+1 < len(d) && d[i+1] == '\'':
				i++
			case d[i] == q:
				return i + 1 - at, string(q), nil
			}
		}
		return 0, "", fmt.Errorf("the quoted value does not end on its line; put it on one line")
	}
	end := at
	for end < len(d) && !strings.ContainsRune(" \t\r\n,]}", rune(d[end])) {
		end++
	}
	if next := bytes.TrimLeft(d[end:], " "); len(next) > 0 && next[0] != '\n' && next[0] != '\r' && next[0] != ',' && next[0] != '}' && next[0] != ']' && next[0] != '#' {
		return 0, "", fmt.Errorf("the value runs past its first word; put the digest alone on its line")
	}
	return end - at, "", nil
}

// sameExceptPins re-reads the rewritten text and checks that it holds the
// same values as before apart from the pins, so an editing mistake can never
// reach the user's file.
func sameExceptPins(file string, before, after []byte, find Finder) error {
	a, err := yaml11.Parse(file, before)
	if err != nil {
		return err
	}
	b, err := yaml11.Parse(file, after)
	if err != nil {
		return fmt.Errorf("%s: rewriting the pins broke the YAML (%v); the file was not changed, please report this", file, err)
	}
	if !reflect.DeepEqual(withoutPins(a, find), withoutPins(b, find)) {
		return fmt.Errorf("%s: rewriting the pins changed more than the pins; the file was not changed, please report this", file)
	}
	return nil
}

// withoutPins renders a document as plain values with the sha256 of every
// pin left out.
func withoutPins(root *yaml11.Node, find Finder) any {
	sites, _ := find("", root)
	skip := map[*yaml11.Node]bool{}
	for _, s := range sites {
		skip[s.ref] = true
	}
	var walk func(n *yaml11.Node) any
	walk = func(n *yaml11.Node) any {
		switch n.Kind {
		case yaml11.Map:
			var out [][2]any
			for _, p := range n.Pairs {
				if skip[n] && p.Key.Text == "sha256" {
					continue
				}
				out = append(out, [2]any{walk(p.Key), walk(p.Value)})
			}
			return out
		case yaml11.Seq:
			out := make([]any, len(n.Items))
			for i, c := range n.Items {
				out[i] = walk(c)
			}
			return out
		}
		return [2]any{n.Kind, n.Text}
	}
	return walk(root)
}
