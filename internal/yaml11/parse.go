package yaml11

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
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
// document gives a Null node. Every failure is an *Error with a line and
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
			root, err = nil, &Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("the YAML parser failed on this document (%v); check its syntax", r)}
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
		return nil, &Error{File: file, Line: line, Col: col, Err: errors.New("expected a single YAML document, found a second one here")}
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
			return &Error{File: file, Line: line, Col: col, Err: fmt.Errorf("invalid UTF-8 byte 0x%02x; save the file as UTF-8", data[i])}
		case r == '\t':
			return &Error{File: file, Line: line, Col: col, Err: errors.New("tab character: indent and separate with spaces; inside a double-quoted string write \\t")}
		case !printable(r):
			return &Error{File: file, Line: line, Col: col, Err: fmt.Errorf("character %U is not allowed in YAML; write it as an escape in a double-quoted string", r)}
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

// checkStructure reads the token stream before goccy's parser does, in one
// pass, and refuses what would make that parser slow:
//
//   - a second document, which PyYAML's safe_load refuses too: goccy splits
//     documents in time quadratic in their number, and silently drops what
//     follows two document markers in a row;
//   - nesting deeper than the builder accepts (MaxDepth), before goccy spends
//     time quadratic in the depth on it;
//   - a block mapping with more than MaxMappingEntries keys;
//   - key paths adding up to more than MaxPathBytes.
//
// It follows block collections by the column of their entries. It may take
// two neighbouring mappings at one column for one, which only matters for
// documents far larger than any manifest. It counts no more levels than a
// document has (but for complex "? key" entries, which the builder refuses
// anyway), so it refuses no depth the builder would accept.
func checkStructure(file string, tokens token.Tokens) error {
	type level struct {
		col  int // column of a block collection's entries; 0 for a flow one
		seq  bool
		keys int
		// path and item estimate the length of goccy's path to the
		// collection and to its latest entry ($.roster[3].generation).
		path, item int
	}
	var stack []level
	flow := 0 // flow levels on top of stack
	docs, inDoc, directiveLine := 0, false, 0
	cost := 0
	fail := func(tk *token.Token, format string, args ...any) error {
		return &Error{File: file, Line: tk.Position.Line, Col: tk.Position.Column, Err: fmt.Errorf(format, args...)}
	}
	push := func(tk *token.Token, l level) error {
		l.path = 1 // "$"
		if len(stack) > 0 {
			l.path = stack[len(stack)-1].item
		}
		stack = append(stack, l)
		if len(stack) > MaxDepth+1 {
			return fail(tk, "nested more than %d levels deep", MaxDepth)
		}
		return nil
	}
	// entry starts an entry of the innermost collection; seg is what it adds
	// to the path: an index or a key.
	entry := func(tk *token.Token, seg int) error {
		top := &stack[len(stack)-1]
		top.item = top.path + seg
		cost += top.item
		if cost > MaxPathBytes {
			return fail(tk, "the paths to this document's values add up to more than %d bytes (long keys over many values, or deep nesting); this is not a file troupe reads", MaxPathBytes)
		}
		return nil
	}
	const indexSegment = 8 // "[12345]"
	for i, tk := range tokens {
		switch tk.Type {
		case token.CommentType:
			continue
		case token.DirectiveType:
			directiveLine = tk.Position.Line
			continue
		case token.DocumentHeaderType:
			if docs > 0 {
				return fail(tk, "expected a single YAML document, found a second one here")
			}
			docs, inDoc = 1, true
			continue
		case token.DocumentEndType:
			inDoc = false
			continue
		}
		if tk.Position.Line == directiveLine {
			continue // the directive's own words
		}
		if !inDoc {
			if docs > 0 {
				return fail(tk, "expected a single YAML document, found a second one here")
			}
			docs, inDoc = 1, true
		}
		var err error
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			if err = push(tk, level{seq: tk.Type == token.SequenceStartType}); err == nil {
				flow++
				err = entry(tk, indexSegment)
			}
		case token.SequenceEndType, token.MappingEndType:
			if flow > 0 {
				flow--
				stack = stack[:len(stack)-1]
			}
		case token.CollectEntryType:
			if flow > 0 {
				err = entry(tk, indexSegment)
			}
		case token.SequenceEntryType:
			if flow > 0 {
				continue
			}
			col := tk.Position.Column
			for len(stack) > 0 && stack[len(stack)-1].col > col {
				stack = stack[:len(stack)-1]
			}
			// A sequence may sit at the column of the mapping key it is
			// the value of; it is still a level of its own.
			if len(stack) == 0 || stack[len(stack)-1].col != col || !stack[len(stack)-1].seq {
				err = push(tk, level{col: col, seq: true})
			}
			if err == nil {
				err = entry(tk, indexSegment)
			}
		case token.MappingValueType:
			if i == 0 {
				continue
			}
			key := tokens[i-1]
			seg := len(key.Value) + 3 // ".key", quoted when odd
			if flow > 0 {
				// The key lengthens the path of the entry begun at "{" or ",".
				err = entry(key, stack[len(stack)-1].item-stack[len(stack)-1].path+seg)
				break
			}
			col := entryColumn(tokens, i-1)
			for len(stack) > 0 && (stack[len(stack)-1].col > col || stack[len(stack)-1].col == col && stack[len(stack)-1].seq) {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 && stack[len(stack)-1].col == col {
				if stack[len(stack)-1].keys++; stack[len(stack)-1].keys > MaxMappingEntries {
					return &Error{File: file, Line: key.Position.Line, Col: key.Position.Column,
						Err: fmt.Errorf("more than %d keys in one mapping; this is not a file troupe reads", MaxMappingEntries)}
				}
			} else {
				err = push(key, level{col: col, keys: 1})
			}
			if err == nil {
				err = entry(key, seg)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// entryColumn is the column where the block mapping entry whose key is
// tokens[k] starts: at the key, or at a tag or anchor written before it on
// its line (&a key: value).
func entryColumn(tokens token.Tokens, k int) int {
	start := k
	for j := k - 1; j >= 0 && tokens[j].Position.Line == tokens[k].Position.Line; j-- {
		switch tokens[j].Type {
		case token.TagType, token.AnchorType, token.AliasType:
			start = j
			continue
		}
		if j > 0 && (tokens[j-1].Type == token.AnchorType || tokens[j-1].Type == token.AliasType) {
			continue // the anchor's or alias's name
		}
		break
	}
	return tokens[start].Position.Column
}

// syntaxError turns goccy's error into a located *Error.
func syntaxError(file string, err error) error {
	if yerr, ok := errors.AsType[goyaml.Error](err); ok {
		if tk := yerr.GetToken(); tk != nil && tk.Position != nil {
			return &Error{File: file, Line: tk.Position.Line, Col: tk.Position.Column, Err: fmt.Errorf("YAML syntax: %s", yerr.GetMessage())}
		}
		return &Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("YAML syntax: %s", yerr.GetMessage())}
	}
	return &Error{File: file, Line: 1, Col: 1, Err: fmt.Errorf("YAML syntax: %w", err)}
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

type anchor struct {
	node       *Node
	line, col  int
	inProgress bool
}

// builder turns goccy's syntax tree into resolved Nodes.
type builder struct {
	file    string
	anchors map[string]*anchor
}

func (b *builder) errorf(line, col int, format string, args ...any) *Error {
	return &Error{File: b.file, Line: line, Col: col, Err: fmt.Errorf(format, args...)}
}

func (b *builder) node(n ast.Node, depth int) (*Node, error) {
	line, col := position(n)
	if depth > MaxDepth {
		return nil, b.errorf(line, col, "nested more than %d levels deep", MaxDepth)
	}
	out := &Node{Line: line, Col: col, size: 1}
	switch v := n.(type) {
	case *ast.MappingNode:
		return b.mapping(out, v.Values, depth)
	case *ast.MappingValueNode:
		return b.mapping(out, []*ast.MappingValueNode{v}, depth)
	case *ast.SequenceNode:
		out.Kind = Seq
		for _, item := range v.Values {
			child, err := b.node(item, depth+1)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, child)
			if err := b.grow(out, child); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *ast.AnchorNode:
		return b.anchored(v, depth)
	case *ast.AliasNode:
		name := v.Value.GetToken().Value
		a, ok := b.anchors[name]
		switch {
		case !ok:
			return nil, b.errorf(line, col, "alias *%s refers to no anchor defined before it", name)
		case a.inProgress:
			return nil, b.errorf(line, col, "alias *%s sits inside the value it refers to; recursive values are not allowed", name)
		}
		return a.node, nil
	case *ast.TagNode:
		return b.tagged(v, depth)
	case *ast.MergeKeyNode:
		return nil, b.errorf(line, col, "%s", errMergeValue)
	case *ast.MappingKeyNode:
		return nil, b.errorf(line, col, "complex mapping keys (?) are not supported")
	}
	text, style, ok := scalar(n)
	if !ok {
		return nil, b.errorf(line, col, "unsupported YAML construct %s", n.Type())
	}
	if style != plain {
		out.Kind, out.Text = String, text
		return out, nil
	}
	if err := resolvePlain(out, text); err != nil {
		return nil, b.errorf(line, col, "%s", err)
	}
	return out, nil
}

type scalarStyle uint8

const (
	plain scalarStyle = iota
	quoted
	block
)

// scalar returns a scalar node's text and how it was written.
func scalar(n ast.Node) (text string, style scalarStyle, ok bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		switch v.GetToken().Type {
		case token.SingleQuoteType, token.DoubleQuoteType:
			return v.Value, quoted, true
		}
		return v.Value, plain, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", block, true
		}
		return v.Value.Value, block, true
	case *ast.NullNode:
		if v.GetToken().Type == token.ImplicitNullType {
			return "", plain, true
		}
		return v.GetToken().Value, plain, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return v.GetToken().Value, plain, true
	}
	return "", plain, false
}

func (b *builder) anchored(v *ast.AnchorNode, depth int) (*Node, error) {
	name := v.Name.GetToken().Value
	line, col := position(v)
	if prev, ok := b.anchors[name]; ok {
		return nil, b.errorf(line, col, "anchor &%s is defined twice (first at line %d, column %d)", name, prev.line, prev.col)
	}
	a := &anchor{line: line, col: col, inProgress: true}
	b.anchors[name] = a
	if v.Value == nil {
		a.node, a.inProgress = &Node{Kind: Null, Line: line, Col: col, Plain: true, size: 1}, false
		return a.node, nil
	}
	child, err := b.node(v.Value, depth)
	if err != nil {
		return nil, err
	}
	a.node, a.inProgress = child, false
	return child, nil
}

// tagged applies the explicit tags safe_load knows for plain data.
func (b *builder) tagged(v *ast.TagNode, depth int) (*Node, error) {
	line, col := position(v)
	tag := v.Start.Value
	name := strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(tag, "!<"), ">"), "tag:yaml.org,2002:")
	name = strings.TrimPrefix(name, "!!")
	if v.Value == nil {
		if name == "null" || name == "str" {
			kind := map[string]Kind{"null": Null, "str": String}[name]
			return &Node{Kind: kind, Line: line, Col: col, size: 1}, nil
		}
		return nil, b.errorf(line, col, "tag %s has no value", tag)
	}
	switch name {
	case "map", "seq":
		inner, err := b.node(v.Value, depth)
		if err != nil {
			return nil, err
		}
		if want := map[string]Kind{"map": Map, "seq": Seq}[name]; inner.Kind != want {
			return nil, b.errorf(line, col, "tag %s needs a %s, found %s", tag, want, inner.Kind)
		}
		return inner, nil
	case "str", "int", "float", "bool", "null":
		text, _, ok := scalar(v.Value)
		if !ok {
			return nil, b.errorf(line, col, "tag %s needs a scalar value", tag)
		}
		out := &Node{Line: line, Col: col, Text: text, size: 1}
		var err error
		switch name {
		case "str":
			out.Kind = String
		case "null":
			out.Kind = Null
		case "int":
			err = construct(out, Int, text)
		case "float":
			err = construct(out, Float, text)
		case "bool":
			err = construct(out, Bool, text)
		}
		if err != nil {
			return nil, b.errorf(line, col, "%s", err)
		}
		return out, nil
	}
	return nil, b.errorf(line, col, "tag %s is not supported here; use plain values", tag)
}

// mapping builds a mapping and applies merge keys the way PyYAML's
// flatten_mapping does: merged pairs come first, a later merge source loses
// to an earlier one, and the mapping's own keys win over all of them.
func (b *builder) mapping(out *Node, values []*ast.MappingValueNode, depth int) (*Node, error) {
	out.Kind = Map
	var merged, own []Pair
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			src, err := b.node(mv.Value, depth+1)
			if err != nil {
				return nil, err
			}
			switch src.Kind {
			case Map:
				merged = append(merged, src.Pairs...)
			case Seq:
				for i := len(src.Items) - 1; i >= 0; i-- {
					item := src.Items[i]
					if item.Kind != Map {
						return nil, b.errorf(item.Line, item.Col, "a merge key (<<) list may hold only mappings, found %s", item.describe())
					}
					merged = append(merged, item.Pairs...)
				}
			default:
				return nil, b.errorf(src.Line, src.Col, "a merge key (<<) needs a mapping or a list of mappings, found %s", src.describe())
			}
			continue
		}
		key, err := b.node(mv.Key, depth+1)
		if err != nil {
			return nil, err
		}
		if !key.IsScalar() {
			return nil, b.errorf(key.Line, key.Col, "a mapping key must be a plain value, found a %s", key.Kind)
		}
		value, err := b.value(mv, depth)
		if err != nil {
			return nil, err
		}
		own = append(own, Pair{Key: key, Value: value})
	}
	type slot struct {
		index    int
		explicit bool
	}
	seen := make(map[string]slot, len(merged)+len(own))
	add := func(p Pair, explicit bool) error {
		id := keyIdentity(p.Key)
		s, ok := seen[id]
		if !ok {
			seen[id] = slot{index: len(out.Pairs), explicit: explicit}
			out.Pairs = append(out.Pairs, p)
			return b.grow(out, p.Key, p.Value)
		}
		if s.explicit && explicit {
			first := out.Pairs[s.index].Key
			return b.errorf(p.Key.Line, p.Key.Col, "key %s is already defined at line %d, column %d", p.Key.Text, first.Line, first.Col)
		}
		out.Pairs[s.index].Value = p.Value
		seen[id] = slot{index: s.index, explicit: s.explicit || explicit}
		return b.grow(out, p.Value)
	}
	for _, p := range merged {
		if err := add(p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range own {
		if err := add(p, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// value builds a mapping value; a key with nothing after its colon is null,
// placed just after the colon.
func (b *builder) value(mv *ast.MappingValueNode, depth int) (*Node, error) {
	if mv.Value == nil {
		line, col := position(mv.Key)
		return &Node{Kind: Null, Line: line, Col: col, Plain: true, size: 1}, nil
	}
	return b.node(mv.Value, depth+1)
}

// grow adds children to a node's expanded size and enforces MaxNodes.
func (b *builder) grow(parent *Node, children ...*Node) error {
	for _, c := range children {
		parent.size += c.size
	}
	if parent.size > MaxNodes {
		return b.errorf(parent.Line, parent.Col, "this value expands to more than %d values (through aliases or sheer size); troupe refuses to read it", MaxNodes)
	}
	return nil
}

// keyIdentity tells when two keys are the same key after resolution, such as
// "a" and a, or 0x1F and 31.
func keyIdentity(k *Node) string {
	switch k.Kind {
	case Int:
		return "int:" + k.Int.String()
	case Bool:
		return fmt.Sprintf("bool:%t", k.Bool)
	case Null:
		return "null"
	case Float:
		return fmt.Sprintf("float:%v", k.Float)
	}
	return k.Kind.String() + ":" + k.Text
}
