package task

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/troupebench/troupe/internal/located"
)

// field names one value of task.toml for messages: its file, table, key
// and, where it can be found, its line (and column: see locator.at).
type field struct {
	path, table, key string
	line, col        int
}

// problem is a problem of this value, located where the value is.
func (f field) problem(format string, args ...any) *located.Error {
	name := f.key
	if f.table != "" {
		name = "[" + f.table + "] " + f.key
	}
	return &located.Error{File: f.path, Line: f.line, Col: f.col, Path: name, Err: fmt.Errorf(format, args...)}
}

// locator finds the line of a key in task.toml: after the header of its
// table ([table], or [[table]] for a list of tables), or as a dotted key
// (table.key = …) anywhere. A key those lines do not show (one in an
// inline table, a quoted one) is found by TOML's own parser, at its line
// and column.
type locator struct {
	path  string
	lines []string
	keys  *keyPlaces
}

func newLocator(path string, data []byte) locator {
	return locator{path: path, lines: strings.Split(string(data), "\n"), keys: &keyPlaces{data: data}}
}

var headerRE = regexp.MustCompile(`^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$`)

// at names a key of a table ("" for the top level; "environment.healthcheck"
// for a sub-table).
func (l locator) at(table, key string) field {
	f := field{path: l.path, table: table, key: key}
	current := ""
	for i, line := range l.lines {
		if m := headerRE.FindStringSubmatch(line); m != nil {
			current = strings.ReplaceAll(m[1], " ", "")
			if current == strings.TrimPrefix(table+"."+key, ".") {
				f.line = i + 1 // the key is a table of its own
				return f
			}
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		name = strings.ReplaceAll(strings.TrimSpace(name), " ", "")
		full := name
		if current != "" {
			full = current + "." + name
		}
		want := key
		if table != "" {
			want = table + "." + key
		}
		if full == want {
			f.line = i + 1
			return f
		}
	}
	if at, ok := l.keys.find(strings.TrimPrefix(table+"."+key, ".")); ok {
		f.line, f.col = at.Line, at.Column
	}
	return f
}

// keyPlaces is where each key of a task.toml is written, as TOML's parser
// reads the file: by the key's dotted name (environment.healthcheck.retries),
// its first place. It is read when a key is first looked up.
type keyPlaces struct {
	data   []byte
	places map[string]unstable.Position
}

func (k *keyPlaces) find(name string) (unstable.Position, bool) {
	if k.places == nil {
		k.places = map[string]unstable.Position{}
		k.read()
	}
	at, ok := k.places[name]
	return at, ok
}

// read walks the file's tables and keys, inline tables included. The file
// was decoded already; a parser that fails or panics on it leaves the
// keys it had not reached unplaced.
func (k *keyPlaces) read() {
	defer func() { _ = recover() }()
	var p unstable.Parser
	p.Reset(k.data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = k.add(&p, nil, e.Key())
		case unstable.KeyValue:
			k.keyValue(&p, table, e)
		}
	}
}

// keyValue places a key = value, and the keys of an inline table value.
func (k *keyPlaces) keyValue(p *unstable.Parser, table []string, kv *unstable.Node) {
	name := k.add(p, table, kv.Key())
	if v := kv.Value(); v.Kind == unstable.InlineTable {
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				k.keyValue(p, name, c)
			}
		}
	}
}

// add places the key the parts of key name, below prefix, at its first
// part, and returns its full name.
func (k *keyPlaces) add(p *unstable.Parser, prefix []string, key unstable.Iterator) []string {
	name := slices.Clone(prefix)
	var first *unstable.Node
	for key.Next() {
		if first == nil {
			first = key.Node()
		}
		name = append(name, string(key.Node().Data))
	}
	if joined := strings.Join(name, "."); first != nil && k.places[joined] == (unstable.Position{}) {
		k.places[joined] = p.Shape(first.Raw).Start
	}
	return name
}
