package yaml11

import (
	"fmt"
	"math/big"
)

// Kind says what a Node holds once YAML 1.1 resolution has run.
type Kind uint8

// The kinds of value a YAML 1.1 document can hold through safe_load.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	// Timestamp is a plain scalar PyYAML turns into a date or datetime. troupe
	// keeps it as text and lets the consumer refuse it, because the original
	// system's hash of such a value is not defined.
	Timestamp
	Map
	Seq
)

// String names the kind the way error messages do.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Int:
		return "integer"
	case Float:
		return "float"
	case String:
		return "string"
	case Timestamp:
		return "timestamp"
	case Map:
		return "mapping"
	case Seq:
		return "sequence"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Node is one resolved YAML value with the place it was written. Aliases
// share the anchored Node, so a Node can appear in several places of a tree.
type Node struct {
	Kind Kind
	// Line and Col are 1-based; Col counts characters, not bytes.
	Line, Col int
	// Text is a scalar's text: the value of a string, the source text of any
	// other scalar (after quoting and folding were undone).
	Text string
	// Plain is true for a scalar written without quotes or block style: only
	// those are subject to YAML 1.1 implicit typing, so only those can be
	// fixed by quoting, which error messages suggest.
	Plain bool
	Bool  bool
	Int   *big.Int
	Float float64
	// Pairs of a mapping after merge keys were applied, in first-seen order.
	Pairs []Pair
	// Items of a sequence.
	Items []*Node

	// size is the number of nodes this one stands for once aliases are
	// expanded; it bounds the work of every later walk over the tree.
	size int
}

// Pair is one key and its value in a mapping.
type Pair struct {
	Key, Value *Node
}

// Get returns the value of a mapping's string key, or nil when the node is
// not a mapping or has no such key.
func (n *Node) Get(key string) *Node {
	if n == nil || n.Kind != Map {
		return nil
	}
	for _, p := range n.Pairs {
		if p.Key.Kind == String && p.Key.Text == key {
			return p.Value
		}
	}
	return nil
}

// IsScalar reports whether the node is neither a mapping nor a sequence.
func (n *Node) IsScalar() bool { return n.Kind != Map && n.Kind != Seq }

// describe renders a node for an error message: kind plus, for scalars, the
// text as written, shortened.
func (n *Node) describe() string {
	if !n.IsScalar() {
		return n.Kind.String()
	}
	if n.Kind == Null && n.Text == "" {
		return "nothing (null)"
	}
	text := n.Text
	if r := []rune(text); len(r) > 40 {
		text = string(r[:37]) + "..."
	}
	if n.Kind == String {
		return fmt.Sprintf("the string %q", text)
	}
	return fmt.Sprintf("%s %s", n.Kind, text)
}
