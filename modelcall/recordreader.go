package modelcall

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"slices"
)

// A RecordReader reads an agent's conversation record a call at a time,
// within its limits: a consumer that needs one call at a time (an export)
// never holds the record's requests whole. Not safe for concurrent use.
type RecordReader struct {
	// Added: each list field of a request (messages, input, tools) holds
	// only the items the call added after those of the previous call's
	// it repeats; Repeated says how many those are. The limits then count
	// what is built: the added items.
	Added bool

	lim      RecordLimits
	lr       *io.LimitedReader
	sc       *bufio.Scanner
	blocks   map[string]json.RawMessage
	last     map[string][]string
	repeated map[string]int
	expanded int64
	index    int
	missing  int
	skipped  int
	line     int
	verified bool
	// lastN is the last call's number, and skippedAtLast the lines
	// skipped when it was read.
	lastN         int64
	skippedAtLast int
	err           error
}

// Verified says whether the record read so far is checked, block by block
// and call by call: false for a record written before troupe wrote digests
// (version 2), which is read as it is.
func (rr *RecordReader) Verified() bool { return rr.verified }

// NewRecordReader reads a decompressed record from r.
func NewRecordReader(r io.Reader, lim RecordLimits) *RecordReader {
	lim = lim.orDefault()
	lr := &io.LimitedReader{R: r, N: lim.Decompressed + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	return &RecordReader{lim: lim, lr: lr, sc: sc, blocks: map[string]json.RawMessage{}, last: map[string][]string{}}
}

// Missing counts the blocks the calls read so far name and the record
// lacks (a bound dropped them); such a call keeps the reference.
func (rr *RecordReader) Missing() int { return rr.missing }

// Skipped counts the lines that are neither a block nor a call (a bound's
// marker where the middle of the record was dropped, a broken line).
func (rr *RecordReader) Skipped() int { return rr.skipped }

// Repeated is, in Added mode, how many items of each list field of the
// last call returned were the previous call's (its "$prefix"). A field is
// in it only if the record kept it as a list of blocks.
func (rr *RecordReader) Repeated() map[string]int { return rr.repeated }

// Next returns the next call, its request whole (or, Added, with what it
// added), and io.EOF after the last. An *ExpansionError refuses one call:
// Next may be called again for the calls after it (the record's limit
// refuses them too, once reached). A *DecompressedError or a read error
// ends the record.
func (rr *RecordReader) Next() (Call, error) {
	if rr.err != nil {
		return Call{}, rr.err
	}
	for rr.sc.Scan() {
		rr.line++
		// One pass over the line: the format, a block or a call.
		var l struct {
			recordFormat
			Block string          `json:"block"`
			JSON  json.RawMessage `json:"json"`
			Call
		}
		if json.Unmarshal(rr.sc.Bytes(), &l) != nil {
			rr.skipped++
			continue
		}
		if l.Record == recordName {
			rr.verified = rr.verified || l.Version >= recordVersion
			continue
		}
		if l.Block != "" {
			if rr.verified && blockID(l.JSON) != l.Block {
				rr.err = &TamperedError{Line: rr.line, Block: l.Block}
				return Call{}, rr.err
			}
			if len(l.JSON) == 0 {
				l.JSON = json.RawMessage("null")
			}
			rr.blocks[l.Block] = l.JSON
			continue
		}
		c := l.Call
		if c.N == 0 {
			continue
		}
		// A call with a digest in a record that does not say it is
		// verified lost its first line: it is read as changed.
		if rr.verified && c.digest() != c.Digest || !rr.verified && c.Digest != "" {
			rr.err = &TamperedError{Line: rr.line, Call: c.N}
			return Call{}, rr.err
		}
		// Calls are numbered from 1 on; a bound that drops the middle of
		// a record leaves its mark, a line that is no call. A call that
		// does not follow the last one with no such mark between them
		// follows calls taken out.
		if rr.verified && c.N != rr.lastN+1 && rr.skipped == rr.skippedAtLast {
			rr.err = &TamperedError{Line: rr.line, Call: c.N, Gap: true, After: rr.lastN}
			return Call{}, rr.err
		}
		rr.lastN, rr.skippedAtLast = c.N, rr.skipped
		rr.index++
		req, err := rr.join(c)
		if err != nil {
			return Call{}, err
		}
		c.Request = req
		return c, nil
	}
	rr.err = rr.sc.Err()
	if rr.err == nil && rr.lr.N <= 0 {
		rr.err = &DecompressedError{Limit: rr.lim.Decompressed}
	}
	if rr.err == nil {
		rr.err = io.EOF
	}
	return Call{}, rr.err
}

// Each calls fn with each call left in the record, in order, and returns
// the error that ended the reading: nil at the record's end.
func (rr *RecordReader) Each(fn func(Call)) error {
	for {
		c, err := rr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(c)
	}
}

// field is one field of a recorded request, resolved to what it names.
type field struct {
	key   string
	whole json.RawMessage   // a plain value, or the one block it names
	items []json.RawMessage // a list of blocks
	list  bool
}

// join puts a recorded request's blocks back: it resolves every reference
// and adds up the request's size first, and builds the request only within
// the limits. A request that is not an object is kept as it is.
func (rr *RecordReader) join(c Call) (json.RawMessage, error) {
	var req map[string]json.RawMessage
	if json.Unmarshal(c.Request, &req) != nil {
		return c.Request, nil
	}
	get := func(id string) json.RawMessage {
		if b, ok := rr.blocks[id]; ok {
			return b
		}
		rr.missing++
		ref, _ := json.Marshal(blockRef{Block: id})
		return ref
	}
	fields := make([]field, 0, len(req))
	size := int64(2) // {}
	rr.repeated = map[string]int{}
	for _, k := range slices.Sorted(maps.Keys(req)) {
		v := req[k]
		f := field{key: k, whole: v}
		var ref blockRef
		switch {
		case len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &ref) != nil || ref.Block == "" && ref.Blocks == nil && ref.Prefix == 0:
		case ref.Block != "":
			f.whole = get(ref.Block)
		default:
			prev := rr.last[k]
			if ref.Prefix < 0 || ref.Prefix > len(prev) {
				// The call it continues was not read (a bound dropped it).
				rr.missing += max(ref.Prefix, 0)
				ref.Prefix = min(max(ref.Prefix, 0), len(prev))
			}
			ids := append(slices.Clone(prev[:ref.Prefix]), ref.Blocks...)
			rr.last[k] = ids
			if rr.Added {
				rr.repeated[k] = ref.Prefix
				ids = ref.Blocks
			}
			f.list, f.items = true, make([]json.RawMessage, len(ids))
			size += 2 // []
			for i, id := range ids {
				f.items[i] = get(id)
				size += int64(len(f.items[i])) + 1
			}
		}
		size += int64(len(k)) + 4 + int64(len(f.whole)) // "k":v,
		fields = append(fields, f)
	}
	if size > rr.lim.Call {
		return nil, &ExpansionError{Call: c.N, Index: rr.index, Size: size, Limit: rr.lim.Call}
	}
	if rr.expanded+size > rr.lim.Record {
		return nil, &ExpansionError{Call: c.N, Index: rr.index, Size: rr.expanded + size, Limit: rr.lim.Record, Record: true}
	}
	rr.expanded += size
	// Built by hand: json.Marshal would escape the blocks' HTML
	// characters again and compact them again, for nothing.
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, f := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(f.key)
		out = append(out, key...)
		out = append(out, ':')
		if !f.list {
			out = append(out, f.whole...)
			continue
		}
		out = append(out, '[')
		for j, it := range f.items {
			if j > 0 {
				out = append(out, ',')
			}
			out = append(out, it...)
		}
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// ReadConversation reads an agent's conversation record (decompressed)
// and returns its calls with their requests whole, within
// DefaultRecordLimits (ReadConversationLimits says which). A line that is
// not JSON (a bound's marker where the middle of the record was dropped)
// is skipped; a call that names a block the record lacks keeps the
// reference and is counted in missing.
func ReadConversation(r io.Reader) (calls []Call, missing int, err error) {
	return ReadConversationLimits(r, RecordLimits{})
}

// ReadConversationLimits is ReadConversation within lim. A call over a
// limit ends the reading with its *ExpansionError.
func ReadConversationLimits(r io.Reader, lim RecordLimits) (calls []Call, missing int, err error) {
	rr := NewRecordReader(r, lim)
	err = rr.Each(func(c Call) { calls = append(calls, c) })
	return calls, rr.Missing(), err
}

// ReadCompressedConversation reads a record as a trial leaves it, gzipped
// (agents/<id>/llm-conversation.jsonl.gz), within DefaultRecordLimits.
func ReadCompressedConversation(r io.Reader) (calls []Call, missing int, err error) {
	return ReadCompressedConversationLimits(r, RecordLimits{})
}

// ReadCompressedConversationLimits is ReadCompressedConversation within
// lim.
func ReadCompressedConversationLimits(r io.Reader, lim RecordLimits) (calls []Call, missing int, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, 0, err
	}
	return ReadConversationLimits(zr, lim)
}
