package located

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestErrorText(t *testing.T) {
	msg := errors.New("must be greater than 0, found 0")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"line, column and path", &Error{File: "m.yaml", Line: 7, Col: 12, Path: "roster[0].count", Err: msg}, "m.yaml:7:12: roster[0].count: must be greater than 0, found 0"},
		{"line and column, no path", &Error{File: "r.json", Line: 1, Col: 46, Err: msg}, "r.json:1:46: must be greater than 0, found 0"},
		{"a line without its column", &Error{File: "task.toml", Line: 2, Path: "[agent] timeout_sec", Err: msg}, "task.toml:2: [agent] timeout_sec: must be greater than 0, found 0"},
		{"no place in the file", &Error{File: "compose.yaml", Path: "services.main.volumes", Err: msg}, "compose.yaml: services.main.volumes: must be greater than 0, found 0"},
		{"the file alone", &Error{File: "m.yaml", Err: msg}, "m.yaml: must be greater than 0, found 0"},
		{"no file", &Error{Line: 1, Col: 1, Err: msg}, "<input>:1:1: must be greater than 0, found 0"},
		{"a column without a line is not shown", &Error{File: "m.yaml", Col: 3, Err: msg}, "m.yaml: must be greater than 0, found 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestJoinOrdersByPlace(t *testing.T) {
	at := func(line, col int, msg string) *Error {
		return &Error{File: "f", Line: line, Col: col, Err: errors.New(msg)}
	}
	tests := []struct {
		name string
		in   []*Error
		want string
	}{
		{"nothing", nil, ""},
		{"one", []*Error{at(3, 1, "a")}, "f:3:1: a"},
		{"lines, then columns", []*Error{at(9, 1, "c"), at(2, 7, "b"), at(2, 3, "a")}, "f:2:3: a\nf:2:7: b\nf:9:1: c"},
		{"file-level first, ties as found", []*Error{at(4, 2, "x"), at(0, 0, "file"), at(4, 2, "y")}, "f: file\nf:4:2: x\nf:4:2: y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Join(tt.in...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got  %q\nwant %q", err, tt.want)
			}
			if _, ok := errors.AsType[List](err); !ok {
				t.Errorf("Join returned %T, not a List", err)
			}
		})
	}
	in := []*Error{at(2, 1, "b"), at(1, 1, "a")}
	Join(in...)
	if in[0].Line != 2 {
		t.Error("Join reordered the caller's slice")
	}
}

func TestAllFindsEveryProblemHoweverWrapped(t *testing.T) {
	a := &Error{File: "a", Line: 1, Col: 1, Err: fs.ErrNotExist}
	b := &Error{File: "b", Err: errors.New("b")}
	c := &Error{File: "c", Line: 2, Col: 2, Err: &Error{File: "inner", Err: errors.New("not listed")}}
	tests := []struct {
		name string
		err  error
		want []*Error
	}{
		{"nil", nil, nil},
		{"not located", errors.New("plain"), nil},
		{"one", a, []*Error{a}},
		{"a list", List{a, b}, []*Error{a, b}},
		{"wrapped in text", fmt.Errorf("task x is not valid:\n%w", List{a, b}), []*Error{a, b}},
		{"joined with others", errors.Join(errors.New("plain"), b, fmt.Errorf("in: %w", List{c, a})), []*Error{b, c, a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := All(tt.err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("problem %d is %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
	if !errors.Is(fmt.Errorf("x: %w", List{b, a}), fs.ErrNotExist) {
		t.Error("errors.Is does not see through a List to a problem's cause")
	}
	if e, ok := errors.AsType[*Error](errors.Join(errors.New("x"), List{b})); !ok || e != b {
		t.Errorf("errors.AsType found %v", e)
	}
}
