package yaml11

import (
	"fmt"

	"github.com/goccy/go-yaml/token"
	"github.com/troupebench/troupe/internal/located"
)

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
	s := &shape{file: file}
	for i, tk := range tokens {
		content, err := s.document(tk)
		if err == nil && content {
			err = s.token(tokens, i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// shape is what checkStructure knows of a document while it reads the
// tokens: the collections open around the current token, the documents
// seen, and the summed length of the paths so far.
type shape struct {
	file  string
	stack []level
	flow  int // flow levels on top of stack
	// started is true once a document began; inDoc while it lasts.
	started, inDoc bool
	// directiveLine is the line of the latest %directive, whose words are
	// not content.
	directiveLine int
	cost          int
}

// level is one open collection.
type level struct {
	col  int // column of a block collection's entries; 0 for a flow one
	seq  bool
	keys int
	// path and item estimate the length of goccy's path to the
	// collection and to its latest entry ($.roster[3].generation).
	path, item int
}

// indexSegment is what an index adds to a path: "[12345]".
const indexSegment = 8

const secondDocument = "expected a single YAML document, found a second one here"

func (s *shape) fail(tk *token.Token, format string, args ...any) error {
	return &located.Error{File: s.file, Line: tk.Position.Line, Col: tk.Position.Column, Err: fmt.Errorf(format, args...)}
}

// document follows document markers and directives and reports whether tk
// is a document's content; content after the first document ended is
// refused.
func (s *shape) document(tk *token.Token) (content bool, err error) {
	switch tk.Type {
	case token.CommentType:
		return false, nil
	case token.DirectiveType:
		s.directiveLine = tk.Position.Line
		return false, nil
	case token.DocumentHeaderType:
		if s.started {
			return false, s.fail(tk, secondDocument)
		}
		s.started, s.inDoc = true, true
		return false, nil
	case token.DocumentEndType:
		s.inDoc = false
		return false, nil
	}
	if tk.Position.Line == s.directiveLine {
		return false, nil // the directive's own words
	}
	if !s.inDoc {
		if s.started {
			return false, s.fail(tk, secondDocument)
		}
		s.started, s.inDoc = true, true
	}
	return true, nil
}

// token follows the collections tokens[i] opens, closes or adds an entry to.
func (s *shape) token(tokens token.Tokens, i int) error {
	tk := tokens[i]
	switch tk.Type {
	case token.SequenceStartType, token.MappingStartType:
		if err := s.push(tk, level{seq: tk.Type == token.SequenceStartType}); err != nil {
			return err
		}
		s.flow++
		return s.entry(tk, indexSegment)
	case token.SequenceEndType, token.MappingEndType:
		if s.flow > 0 {
			s.flow--
			s.stack = s.stack[:len(s.stack)-1]
		}
	case token.CollectEntryType:
		if s.flow > 0 {
			return s.entry(tk, indexSegment)
		}
	case token.SequenceEntryType:
		if s.flow == 0 {
			return s.blockSequenceEntry(tk)
		}
	case token.MappingValueType:
		if i > 0 {
			return s.mappingValue(tokens, i-1)
		}
	}
	return nil
}

func (s *shape) top() *level { return &s.stack[len(s.stack)-1] }

// push opens a collection, refusing one deeper than MaxDepth.
func (s *shape) push(tk *token.Token, l level) error {
	l.path = 1 // "$"
	if len(s.stack) > 0 {
		l.path = s.top().item
	}
	s.stack = append(s.stack, l)
	if len(s.stack) > MaxDepth+1 {
		return s.fail(tk, "nested more than %d levels deep", MaxDepth)
	}
	return nil
}

// entry starts an entry of the innermost collection; seg is what it adds
// to the path: an index or a key.
func (s *shape) entry(tk *token.Token, seg int) error {
	top := s.top()
	top.item = top.path + seg
	s.cost += top.item
	if s.cost > MaxPathBytes {
		return s.fail(tk, "the paths to this document's values add up to more than %d bytes (long keys over many values, or deep nesting); this is not a file troupe reads", MaxPathBytes)
	}
	return nil
}

// blockSequenceEntry follows a "- " of a block sequence.
func (s *shape) blockSequenceEntry(tk *token.Token) error {
	col := tk.Position.Column
	for len(s.stack) > 0 && s.top().col > col {
		s.stack = s.stack[:len(s.stack)-1]
	}
	// A sequence may sit at the column of the mapping key it is the value
	// of; it is still a level of its own.
	if len(s.stack) == 0 || s.top().col != col || !s.top().seq {
		if err := s.push(tk, level{col: col, seq: true}); err != nil {
			return err
		}
	}
	return s.entry(tk, indexSegment)
}

// mappingValue follows the ":" after the key tokens[k].
func (s *shape) mappingValue(tokens token.Tokens, k int) error {
	key := tokens[k]
	seg := len(key.Value) + 3 // ".key", quoted when odd
	if s.flow > 0 {
		// The key lengthens the path of the entry begun at "{" or ",".
		top := s.top()
		return s.entry(key, top.item-top.path+seg)
	}
	col := entryColumn(tokens, k)
	for len(s.stack) > 0 && (s.top().col > col || s.top().col == col && s.top().seq) {
		s.stack = s.stack[:len(s.stack)-1]
	}
	if len(s.stack) == 0 || s.top().col != col {
		if err := s.push(key, level{col: col, keys: 1}); err != nil {
			return err
		}
		return s.entry(key, seg)
	}
	top := s.top()
	if top.keys++; top.keys > MaxMappingEntries {
		return s.fail(key, "more than %d keys in one mapping; this is not a file troupe reads", MaxMappingEntries)
	}
	return s.entry(key, seg)
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
