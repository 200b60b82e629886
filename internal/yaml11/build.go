package yaml11

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
	"github.com/troupebench/troupe/internal/located"
)

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

func (b *builder) errorf(line, col int, format string, args ...any) *located.Error {
	return &located.Error{File: b.file, Line: line, Col: col, Err: fmt.Errorf(format, args...)}
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
