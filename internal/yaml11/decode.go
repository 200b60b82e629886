package yaml11

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/suggest"
)

// Decoder turns Nodes into typed values and collects every problem it finds,
// so a caller can decode a whole file and report all of it at once. Methods
// that return (value, ok) have already recorded why ok is false.
type Decoder struct {
	File string
	// NumericStrings accepts a string that spells a decimal number where a
	// number is expected, as pydantic's lax mode does. YAML 1.1 reads 1e-06
	// as a string, and the original system still took it as a float, so
	// manifests need this to load unchanged.
	NumericStrings bool
	errs           []*located.Error
}

// Errorf records a problem at n (which may be nil for file-level problems).
func (d *Decoder) Errorf(n *Node, path, format string, args ...any) {
	e := &located.Error{File: d.File, Path: path, Err: fmt.Errorf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Col
	}
	d.errs = append(d.errs, e)
}

// Count is the number of problems recorded so far; comparing it before and
// after decoding a part tells whether that part was clean.
func (d *Decoder) Count() int { return len(d.errs) }

// Err returns every recorded problem in file order, as a located.List, or
// nil.
func (d *Decoder) Err() error { return located.Join(d.errs...) }

// Field describes one key of a mapping decoded by Struct.
type Field struct {
	Name     string
	Required bool
	// Decode is called with the key's value and its path when the key is
	// present. It is not called for an absent key.
	Decode func(n *Node, path string)
}

// Struct decodes a mapping with a fixed set of keys: it reports a value that
// is not a mapping, keys that are not strings, unknown keys (suggesting the
// closest known one, or giving the reason from refused), and missing
// required keys; then it calls each present field's Decode in field order.
// It returns false when n is not a mapping.
func (d *Decoder) Struct(n *Node, path string, fields []Field, refused map[string]string) bool {
	if n.Kind != Map {
		d.Errorf(n, path, "must be a mapping of keys to values, found %s", n.describe())
		return false
	}
	byName := make(map[string]*Node, len(n.Pairs))
	suggested := map[string]bool{}
	for _, p := range n.Pairs {
		if p.Key.Kind != String {
			d.Errorf(p.Key, path, "key %s is read by YAML 1.1 as %s, not as a name; %s", p.Key.Text, p.Key.describe(), quoteHint(p.Key))
			continue
		}
		name := p.Key.Text
		if !slices.ContainsFunc(fields, func(f Field) bool { return f.Name == name }) {
			msg, guess := unknownKey(name, fields, refused)
			suggested[guess] = true
			d.Errorf(p.Key, Key(path, name), "%s", msg)
			continue
		}
		byName[name] = p.Value
	}
	for _, f := range fields {
		v, ok := byName[f.Name]
		switch {
		case ok:
			f.Decode(v, Key(path, f.Name))
		case f.Required && !suggested[f.Name]: // a misspelling is reported once, as such
			d.Errorf(n, path, "missing required key %q", f.Name)
		}
	}
	return true
}

// unknownKey explains an unknown key and returns the known key it most
// likely misspells, if any.
func unknownKey(name string, fields []Field, refused map[string]string) (msg, guess string) {
	if reason, ok := refused[name]; ok {
		return fmt.Sprintf("key %q is not allowed: %s", name, reason), ""
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	if best := suggest.Closest(name, names); best != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", name, best), best
	}
	return fmt.Sprintf("unknown key %q; the keys allowed here are %s", name, strings.Join(names, ", ")), ""
}

// IsNull reports whether n is YAML null (absent value, ~ or null).
func IsNull(n *Node) bool { return n == nil || n.Kind == Null }

// String decodes a string value.
func (d *Decoder) String(n *Node, path string) (string, bool) {
	if n.Kind != String {
		d.Errorf(n, path, "must be a string, found %s%s", n.describe(), hintSuffix(n))
		return "", false
	}
	return n.Text, true
}

// Int decodes a whole number that fits in 64 bits.
func (d *Decoder) Int(n *Node, path string) (int64, bool) {
	switch n.Kind {
	case Int:
		if !n.Int.IsInt64() {
			d.Errorf(n, path, "%s is too large", n.Text)
			return 0, false
		}
		return n.Int.Int64(), true
	case Float:
		d.Errorf(n, path, "must be a whole number, found float %s", n.Text)
	case String:
		if d.NumericStrings && decimalInt.MatchString(n.Text) {
			v, ok := new(big.Int).SetString(n.Text, 10)
			if ok && v.IsInt64() {
				return v.Int64(), true
			}
			d.Errorf(n, path, "%s is too large", n.Text)
			return 0, false
		}
		d.Errorf(n, path, "must be a whole number, found %s%s", n.describe(), hintSuffix(n))
	default:
		d.Errorf(n, path, "must be a whole number, found %s%s", n.describe(), hintSuffix(n))
	}
	return 0, false
}

// Float decodes a finite number. An integer is accepted and becomes a float,
// as the original system's pydantic model coerced it (5 is hashed as 5.0).
func (d *Decoder) Float(n *Node, path string) (float64, bool) {
	var v float64
	switch n.Kind {
	case Float:
		v = n.Float
	case Int:
		f, _ := new(big.Float).SetInt(n.Int).Float64()
		v = f
	case String:
		if !d.NumericStrings || !decimalFloat.MatchString(n.Text) {
			d.Errorf(n, path, "must be a number, found %s%s", n.describe(), hintSuffix(n))
			return 0, false
		}
		v, _ = strconv.ParseFloat(n.Text, 64) // out of range gives ±Inf, refused below
	default:
		d.Errorf(n, path, "must be a number, found %s%s", n.describe(), hintSuffix(n))
		return 0, false
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		d.Errorf(n, path, "must be a finite number, found %s", n.Text)
		return 0, false
	}
	return v, true
}

// Bool decodes a YAML 1.1 boolean (true/false, yes/no, on/off).
func (d *Decoder) Bool(n *Node, path string) (bool, bool) {
	if n.Kind != Bool {
		d.Errorf(n, path, "must be true or false, found %s", n.describe())
		return false, false
	}
	return n.Bool, true
}

// Seq decodes a sequence, calling item for each element with its path.
func (d *Decoder) Seq(n *Node, path string, item func(n *Node, path string)) bool {
	if n.Kind != Seq {
		d.Errorf(n, path, "must be a list, found %s", n.describe())
		return false
	}
	for i, c := range n.Items {
		item(c, Index(path, i))
	}
	return true
}

// Map decodes a mapping with free string keys, calling entry for each pair.
func (d *Decoder) Map(n *Node, path string, entry func(key string, k, v *Node, path string)) bool {
	if n.Kind != Map {
		d.Errorf(n, path, "must be a mapping, found %s", n.describe())
		return false
	}
	for _, p := range n.Pairs {
		if p.Key.Kind != String {
			d.Errorf(p.Key, path, "key %s is read by YAML 1.1 as %s, not as a name; %s", p.Key.Text, p.Key.describe(), quoteHint(p.Key))
			continue
		}
		entry(p.Key.Text, p.Key, p.Value, Key(path, p.Key.Text))
	}
	return true
}

// Any decodes a free-form value into JSON-shaped Go values: nil, bool,
// string, json.Number for integers (exact, any size), float64 for floats,
// []any and map[string]any. Keys must be strings; timestamps and non-finite
// floats are refused because they have no agreed JSON form.
func (d *Decoder) Any(n *Node, path string) (any, bool) {
	switch n.Kind {
	case Null:
		return nil, true
	case Bool:
		return n.Bool, true
	case String:
		return n.Text, true
	case Int:
		return json.Number(n.Int.String()), true
	case Float:
		return d.Float(n, path)
	case Timestamp:
		d.Errorf(n, path, "%s is read by YAML 1.1 as a date, whose hashed form is undefined; quote it: %q", n.Text, n.Text)
		return nil, false
	case Seq:
		out := make([]any, 0, len(n.Items))
		ok := true
		d.Seq(n, path, func(c *Node, p string) {
			v, vok := d.Any(c, p)
			ok = ok && vok
			out = append(out, v)
		})
		return out, ok
	case Map:
		out := make(map[string]any, len(n.Pairs))
		before := d.Count()
		d.Map(n, path, func(key string, _, v *Node, p string) {
			if val, vok := d.Any(v, p); vok {
				out[key] = val
			}
		})
		return out, d.Count() == before
	}
	return nil, false
}

// hintSuffix explains, for a plain scalar of the wrong type, how YAML 1.1
// read it and how to write what was probably meant.
func hintSuffix(n *Node) string {
	if !n.Plain {
		if n.Kind == String {
			if _, err := strconv.ParseFloat(n.Text, 64); err == nil {
				return "; remove the quotes to make it a number"
			}
		}
		return ""
	}
	switch n.Kind {
	case Bool, Int, Float, Null, Timestamp:
		return "; " + quoteHint(n)
	case String:
		if looksNumeric.MatchString(n.Text) {
			return fmt.Sprintf("; YAML 1.1 reads %s as text: a float needs a dot and a signed exponent, such as 1.0e-06", n.Text)
		}
	}
	return ""
}

// The numeric strings pydantic's lax mode reads as numbers, less its
// rarities (spaces, underscores, inf and nan), which stay refused.
var (
	decimalInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	decimalFloat = regexp.MustCompile(`^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$`)
)

var looksNumeric = regexp.MustCompile(`^[-+]?(?:[0-9][0-9_]*)?\.?[0-9_]*(?:[eE][-+]?[0-9]+)?$`)

func quoteHint(n *Node) string {
	if n.Text == "" {
		return "give it a value"
	}
	return fmt.Sprintf("YAML 1.1 reads an unquoted %s as %s; write %q in quotes if you mean the text", n.Text, n.describe(), n.Text)
}

// Key appends a mapping key to a path: dotted when the key is a plain name,
// bracketed and quoted otherwise (prices["openai/gpt-5"]).
func Key(path, name string) string {
	if !isPlainName(name) {
		return path + "[" + strconv.Quote(name) + "]"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// isPlainName reports whether a key can be written dotted: [A-Za-z_][A-Za-z0-9_]*.
func isPlainName(s string) bool {
	for i, c := range []byte(s) {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// Index appends a sequence index to a path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
