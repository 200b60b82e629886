package yaml11

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/troupebench/troupe/internal/located"
)

// Limits on what a document may cost to read. They are far above what any
// manifest or config needs and far below what would stall the reader.
const (
	// MaxNodes bounds the values of a document once aliases are expanded, so
	// a "billion laughs" document is refused instead of walked.
	MaxNodes = 250_000
	// MaxDepth bounds nesting.
	MaxDepth = 100
	// MaxMappingEntries bounds the keys of one block mapping: goccy's parser
	// takes time quadratic in that number (10,000 keys cost half a second).
	MaxMappingEntries = 5_000
	// MaxPathBytes bounds the summed length of the paths to a document's
	// values ($.roster[3].generation is 21 bytes): goccy's parser builds each
	// one by copying its parent's, so a long key over many values, or deep
	// nesting, costs the product of the two. An ordinary 1 MiB document needs
	// a few MiB.
	MaxPathBytes = 64 << 20
)

// Parse reads one YAML document. The file name only labels errors. An empty
// document gives a Null node. Every failure is a *located.Error with a line and
// column.
func Parse(file string, data []byte) (root *Node, err error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // PyYAML skips a leading BOM too.
	if err := checkCharacters(file, data); err != nil {
		return nil, err
	}
	tokens := lexer.Tokenize(string(data))
	if err := checkStructure(file, tokens); err != nil {
		return nil, err
	}
	// goccy's parser has panicked on inputs found by fuzzing; a panic there is
	// a malformed document, not a crash of troupe.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &located.Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("the YAML parser failed on this document (%v); check its syntax", r)}
		}
	}()
	f, perr := parser.Parse(tokens, 0)
	if perr != nil {
		return nil, syntaxError(file, perr)
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		return &Node{Kind: Null, Line: 1, Col: 1, size: 1}, nil
	}
	if len(docs) > 1 {
		line, col := position(docs[1].Body)
		return nil, &located.Error{File: file, Line: line, Col: col, Err: errors.New("expected a single YAML document, found a second one here")}
	}
	b := &builder{file: file, anchors: map[string]*anchor{}}
	return b.node(docs[0].Body, 0)
}

// checkCharacters refuses what PyYAML's reader refuses, invalid UTF-8 and
// non-printable characters, and also every tab: goccy's lexer silently drops
// a tab inside a plain scalar and accepts tabs where PyYAML refuses them, so
// only a document without tabs reads the same in both.
func checkCharacters(file string, data []byte) error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return &located.Error{File: file, Line: line, Col: col, Err: fmt.Errorf("invalid UTF-8 byte 0x%02x; save the file as UTF-8", data[i])}
		case r == '\t':
			return &located.Error{File: file, Line: line, Col: col, Err: errors.New("tab character: indent and separate with spaces; inside a double-quoted string write \\t")}
		case !printable(r):
			return &located.Error{File: file, Line: line, Col: col, Err: fmt.Errorf("character %U is not allowed in YAML; write it as an escape in a double-quoted string", r)}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

// printable is PyYAML's Reader.NON_PRINTABLE complement.
func printable(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		return true
	case r >= 0x20 && r <= 0x7e:
		return true
	case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		return true
	}
	return false
}

// syntaxError turns goccy's error into a located *located.Error.
func syntaxError(file string, err error) error {
	if yerr, ok := errors.AsType[goyaml.Error](err); ok {
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			return &located.Error{File: file, Line: tk.Position.Line, Col: tk.Position.Column, Err: fmt.Errorf("YAML syntax: %s", yerr.GetMessage())}
		}
		return &located.Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("YAML syntax: %s", yerr.GetMessage())}
	}
	return &located.Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("YAML syntax: %w", err)}
}

// position is where a goccy node starts, for messages.
func position(n ast.Node) (line, col int) {
	switch v := n.(type) {
	case *ast.MappingNode:
		if !v.IsFlowStyle && len(v.Values) > 0 {
			return position(v.Values[0])
		}
	case *ast.MappingValueNode:
		return position(v.Key)
	case *ast.AnchorNode:
		if v.Value != nil {
			return position(v.Value)
		}
	case *ast.TagNode:
		if v.Value != nil {
			return position(v.Value)
		}
	}
	if n == nil {
		return 1, 1
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line, tk.Position.Column
	}
	return 1, 1
}
