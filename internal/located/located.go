// Package located is the one error type troupe's loaders report a problem
// of a file with: the file, the line and column, the key path inside the
// file, and what is wrong there. The manifest, task.toml, compose, stacks
// and registry loaders and the YAML reader all return it, so a caller
// branches on one type (errors.AsType[*located.Error]) and a user reads
// every problem in one form: file:line:col: key.path: message.
//
// A loader that finds several problems returns them together, as a List in
// file order, so that a user sees every problem of a file at once.
package located

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem of a file, where it is and what it is. The zero
// values of its place mean "not known": a file-level problem has no Line,
// and a loader that knows a problem's line but not its column (task.toml's
// values are found by line) leaves Col 0.
type Error struct {
	// File names the file (or URL) as the user gave it; "" prints as
	// <input>.
	File string
	// Line and Col count from 1. Col counts characters in YAML and bytes
	// in JSON and TOML, as each format's reader reports it.
	Line, Col int
	// Path is the key inside the file, in the file format's own spelling:
	// roster[1].generation.max_output_tokens, prices["openai/gpt-5"],
	// services.main.volumes, [agent] timeout_sec. "" for none.
	Path string
	// Err is what is wrong; messages are written to follow the path.
	Err error
}

// Error renders the problem as file:line:col: path: message, leaving out
// what is not known.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.File, "<input>"))
	switch {
	case e.Line > 0 && e.Col > 0:
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	case e.Line > 0:
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns what is wrong, so that errors.Is sees through the place.
func (e *Error) Unwrap() error { return e.Err }

// List is every problem a loader found, one per line. It unwraps to its
// members, so errors.Is and errors.AsType see each of them.
type List []*Error

// Error renders each problem on a line of its own.
func (l List) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes every member to errors.Is and errors.AsType.
func (l List) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Join returns the problems as a List in file order (problems without a
// line first, ties in the order they were found), or nil when there are
// none. The problems given are not reordered.
func Join(errs ...*Error) error {
	if len(errs) == 0 {
		return nil
	}
	out := slices.Clone(List(errs))
	slices.SortStableFunc(out, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return out
}

// All returns every located problem err holds, depth first in the order
// they were joined or wrapped: a caller that lists problems (troupe
// validate --json) reads them from any error a loader returns, however it
// was wrapped. It does not look inside an *Error's own Err.
func All(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				walk(c)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return out
}
