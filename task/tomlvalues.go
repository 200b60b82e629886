package task

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/troupebench/troupe/internal/located"
	"github.com/troupebench/troupe/internal/suggest"
)

// problems collects the problems of one task.toml, in the order found.
type problems struct {
	errs []*located.Error
}

func (p *problems) add(f field, format string, args ...any) {
	p.errs = append(p.errs, f.problem(format, args...))
}

// The conversions below read a value as Harbor's models do (pydantic's lax
// mode); ok is false, with the problem recorded, when Harbor refuses it too.

// asString reads a string; Harbor takes no number for one.
func (p *problems) asString(f field, v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	p.add(f, "must be a string, found %v", v)
	return "", false
}

// asFloat reads a number of seconds or of CPUs: a number, or a string
// holding one.
func (p *problems) asFloat(f field, v any) (float64, bool) {
	var x float64
	switch v := v.(type) {
	case int64:
		x = float64(v)
	case float64:
		x = v
	case string:
		var err error
		if x, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			p.add(f, "must be a number, found %q", v)
			return 0, false
		}
	default:
		p.add(f, "must be a number, found %v", v)
		return 0, false
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		p.add(f, "must be a finite number, found %v", x)
		return 0, false
	}
	return x, true
}

// asInt reads a whole number: an integer, a float without a fraction, a
// string holding one, or a boolean (1 or 0), as Harbor does.
func (p *problems) asInt(f field, v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n, true
		}
	}
	p.add(f, "must be a whole number, found %v", v)
	return 0, false
}

// seconds reads a phase's timeout into into: a number of seconds above 0,
// at most a week; nil leaves the default.
func (p *problems) seconds(f field, v any, into *time.Duration) {
	if v == nil {
		return
	}
	if x, ok := p.asFloat(f, v); ok {
		if x <= 0 || x > 7*24*3600 {
			p.add(f, "must be a number of seconds above 0 (at most a week), found %v", x)
			return
		}
		*into = time.Duration(x * float64(time.Second))
	}
}

// asBool reads true or false, or the strings "true" and "false".
func (p *problems) asBool(f field, v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, true
		}
	}
	p.add(f, "must be true or false, found %v", v)
	return false, false
}

// asUser reads a user: a name or a uid.
func (p *problems) asUser(f field, v any) string {
	switch u := v.(type) {
	case nil:
		return ""
	case string:
		if strings.ContainsAny(u, ":\n") {
			p.add(f, "must be a user name or a uid, found %q", u)
			return ""
		}
		return strings.TrimSpace(u)
	}
	n, ok := p.asInt(f, v)
	if !ok || n < 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// asStrings reads a list of strings.
func (p *problems) asStrings(f field, v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		p.add(f, "must be a list of strings, found %v", v)
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			p.add(f, "must be a list of strings, found %v among them", x)
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// sizeMB reads Harbor's older memory and storage spellings: "2G", "512M",
// "1024K" (binary units, case and spaces ignored, truncated to whole MiB).
func (p *problems) sizeMB(f field, v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		p.add(f, "must be a string such as \"2G\" or \"512M\" (or use %s_mb, a number of MiB), found %v", f.key, v)
		return 0, false
	}
	t := strings.ToUpper(strings.TrimSpace(s))
	scale := map[byte]float64{'G': 1024, 'M': 1, 'K': 1.0 / 1024}
	if t != "" {
		if k, ok := scale[t[len(t)-1]]; ok {
			if x, err := strconv.ParseFloat(t[:len(t)-1], 64); err == nil && x >= 0 && !math.IsInf(x, 0) {
				return int64(x * k), true
			}
		}
	}
	p.add(f, "%q is not a size such as \"2G\", \"512M\" or \"1024K\"", s)
	return 0, false
}

// knownIn reports keys of a sub-table that Harbor does not define, as
// warnings, each at its line.
func knownIn(at locator, table string, m map[string]any, known ...string) []*located.Error {
	var out []*located.Error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			msg := "unknown key, ignored (Harbor ignores it too)"
			if guess := suggest.Closest(k, known); guess != "" {
				msg += fmt.Sprintf("; did you mean %q?", guess)
			}
			out = append(out, at.at(table, k).problem("%s", msg))
		}
	}
	return out
}
