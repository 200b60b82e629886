package llm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
)

// A conversation record (AgentSpec.Conversation) holds every call of an
// agent whole: what it asked and what it was answered, the answer as the
// agent received it (a stream's events as they passed, scrubbed). An agent
// resends its whole history with each call, so a record would grow with
// the square of its calls; instead large parts of a request are written
// once, as blocks named by their digest, and each call names its blocks:
//
//	{"block":"<id>","json":<a message, a tool list, a system prompt>}
//	{"call":3,"time":…,"api":"openai","status":200,"stream":false,
//	 "request":{"model":…,"messages":{"$blocks":["<id>",…]},…},
//	 "answer":<the answer's JSON> | "answer_text":"<a stream's events>",
//	 "answer_omitted":<bytes not kept>}
//
// A request's array fields (messages, input, tools) become lists of
// blocks, element by element, and a list that starts like the same field
// of the agent's previous call says only how many of that call's blocks it
// starts with ("$prefix") and names the rest: a call costs what it adds.
// Any other field over blockMin bytes (a system prompt) becomes one block.
// Blocks are an agent's own: a record reads alone, in order.
//
// A record is tamper-evident. Its first line says its format,
//
//	{"record":"troupe/conversation","version":2}
//
// a block's id is the digest of its JSON as written, and each call holds
// a digest of itself as written ("digest": its request with its block
// references, its answer, its status and error), so a reader checks every
// block against its id and every call against its digest: an edited
// block or call is refused with the line that was changed (TamperedError),
// never read as what was recorded. What is recorded is scrubbed before its
// digests are taken, so the trial's files, scrubbed again, hold the bytes
// the digests name. A record without the first line (written before
// version 2) is read unverified (RecordReader.Verified).

// blockMin is the size from which a non-array field is kept as a block.
const blockMin = 256

// maxAnswerKept bounds the answer kept of one call.
const maxAnswerKept = 4 << 20

// recordFormat is a record's first line (version 2 on: verified).
type recordFormat struct {
	Record  string `json:"record"`
	Version int    `json:"version"`
}

const (
	recordName    = "troupe/conversation"
	recordVersion = 2
)

type blockLine struct {
	Block string          `json:"block"`
	JSON  json.RawMessage `json:"json"`
}

// blockRef is what a request holds in place of a block, or of a list of
// them: the first Prefix blocks of the same field of the previous call,
// then Blocks.
type blockRef struct {
	Prefix int      `json:"$prefix,omitempty"`
	Blocks []string `json:"$blocks,omitempty"`
	Block  string   `json:"$block,omitempty"`
}

// conversation is an agent's record being written: the blocks it holds,
// and each list field's blocks in the previous call. Guarded by the
// trial's mutex.
type conversation struct {
	written map[string]bool
	last    map[string][]string
	calls   int64
}

func blockID(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// split replaces a request's large parts by blocks, returning the request
// as recorded and the blocks it needs that the record lacks.
func (cv *conversation) split(request []byte) (json.RawMessage, []blockLine) {
	var req map[string]json.RawMessage
	if json.Unmarshal(request, &req) != nil {
		// Not an object (the gateway refused it): kept as it came.
		data, _ := json.Marshal(string(request))
		return data, nil
	}
	var blocks []blockLine
	add := func(data json.RawMessage) string {
		// Named by the digest of the bytes the record will hold: the
		// encoder writes a raw value compacted, its HTML characters
		// escaped.
		data, _ = json.Marshal(data)
		id := blockID(data)
		if !cv.written[id] {
			cv.written[id] = true
			blocks = append(blocks, blockLine{Block: id, JSON: slices.Clone(data)})
		}
		return id
	}
	for k, v := range req {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '[':
			var items []json.RawMessage
			if json.Unmarshal(v, &items) != nil || len(items) == 0 {
				continue
			}
			ids := make([]string, len(items))
			for i, it := range items {
				ids[i] = add(it)
			}
			prev := cv.last[k]
			p := 0
			for p < len(prev) && p < len(ids) && prev[p] == ids[p] {
				p++
			}
			if cv.last == nil {
				cv.last = map[string][]string{}
			}
			cv.last[k] = ids
			req[k], _ = json.Marshal(blockRef{Prefix: p, Blocks: ids[p:]})
		case len(v) > blockMin:
			req[k], _ = json.Marshal(blockRef{Block: add(v)})
		}
	}
	out, _ := json.Marshal(req)
	return out, blocks
}

// recordConversation writes a finished call to the agent's record. The
// caller holds the trial's mutex.
func (st *agentState) recordConversation(c *call) {
	w := st.spec.Conversation
	if w == nil || c.request == nil {
		return
	}
	t := st.trial
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if st.conv == nil {
		st.conv = &conversation{written: map[string]bool{}}
		enc.Encode(recordFormat{Record: recordName, Version: recordVersion})
	}
	cv := st.conv
	cv.calls++
	// Scrubbed before the digests are taken: the bytes written are those
	// the digests name.
	scrub := t.records.Scrub
	request, blocks := cv.split(scrub(c.request))
	line := Call{N: cv.calls, Time: c.start.UTC(), API: c.api, Status: c.status, Stream: c.stream, Request: request,
		AnswerOmitted: c.answerOmitted, Error: string(scrub([]byte(c.errMsg)))}
	switch answer := scrub(c.answer.Bytes()); {
	case len(answer) == 0:
	case !c.stream && json.Valid(answer):
		// As the encoder will write it (compacted, HTML escaped), so that
		// the digest is over the bytes the record holds.
		line.Answer, _ = json.Marshal(json.RawMessage(answer))
	default:
		line.AnswerText = string(answer)
	}
	line.Digest = line.digest()
	for _, b := range blocks {
		enc.Encode(b)
	}
	enc.Encode(line)
	if _, err := w.Write(t.records.Scrub(buf.Bytes())); err != nil {
		t.g.Logger.Error("cannot write the conversation record", "agent", st.spec.ID, "err", err)
	}
}

// keepAnswer adds what the agent received to the call's answer, within
// maxAnswerKept; the rest is counted. It is kept with no record too: the
// gateway reads from it whether the agent's turn goes on.
func (c *call) keepAnswer(data []byte) {
	room := maxAnswerKept - c.answer.Len()
	if room < len(data) {
		c.answerOmitted += len(data) - max(room, 0)
		data = data[:max(room, 0)]
	}
	c.answer.Write(data)
}

// Call is one call of a conversation record: as written, its request
// holds blocks; as ReadConversation returns it, the request is whole
// again.
type Call struct {
	N       int64           `json:"call"`
	Time    time.Time       `json:"time"`
	API     API             `json:"api"`
	Status  int             `json:"status"`
	Stream  bool            `json:"stream"`
	Request json.RawMessage `json:"request"`
	// Answer is a plain answer's JSON; AnswerText a stream's events.
	Answer        json.RawMessage `json:"answer,omitempty"`
	AnswerText    string          `json:"answer_text,omitempty"`
	AnswerOmitted int             `json:"answer_omitted,omitempty"`
	Error         string          `json:"error,omitempty"`
	// Digest is the call's, as written (digest): a reader checks it.
	Digest string `json:"digest,omitempty"`
}

// digest is a call's digest over what the record holds of it: its number,
// time, format, status, request as written (its blocks named by their own
// digests), answer and error, each length-prefixed. Its raw JSON is hashed
// as it is: the writer holds it as the encoder writes it (compacted, HTML
// escaped), which is what the reader reads back, so both give one digest.
func (c Call) digest() string {
	h := sha256.New()
	part := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	part(strconv.AppendInt(nil, c.N, 10))
	part([]byte(c.Time.UTC().Format(time.RFC3339Nano)))
	part([]byte(c.API))
	part(strconv.AppendInt(nil, int64(c.Status), 10))
	part(strconv.AppendBool(nil, c.Stream))
	part(c.Request)
	part(c.Answer)
	part([]byte(c.AnswerText))
	part(strconv.AppendInt(nil, int64(c.AnswerOmitted), 10))
	part([]byte(c.Error))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// TamperedError: a line of a verified record does not match its digest
// (a block its id, a call its digest): the record was changed after it
// was written, there. Reading ends at it.
type TamperedError struct {
	// Line is the record's line, from 1; Call the call's number, or Block
	// the block's id.
	Line  int
	Call  int64
	Block string
	// Gap: the call follows call After (0: none), not the call before
	// it: calls were taken out.
	Gap   bool
	After int64
}

func (e *TamperedError) Error() string {
	if e.Gap {
		return fmt.Sprintf("line %d: call %d follows call %d: calls were taken out of the record there after it was written", e.Line, e.Call, e.After)
	}
	if e.Block != "" {
		return fmt.Sprintf("line %d: block %s does not match its content: the record was changed there after it was written", e.Line, e.Block)
	}
	return fmt.Sprintf("line %d: call %d does not match its digest: the record was changed there after it was written", e.Line, e.Call)
}

// maxRecordLine bounds one line of a record when it is read.
const maxRecordLine = 64 << 20

// RecordLimits bound what reading a conversation record back may cost. A
// record is small on disk, but its calls name blocks: a tampered record of
// a few hundred bytes, compressed, can name one large block thousands of
// times, and a reader that put every request back whole would build
// gigabytes. The limits are checked before a request is built, from the
// sizes of the blocks it names, so a refused call costs nothing. Zero
// fields take DefaultRecordLimits' values.
type RecordLimits struct {
	// Decompressed bounds the record's bytes, decompressed.
	Decompressed int64
	// Call bounds one call's request, whole again.
	Call int64
	// Record bounds the requests of all the record's calls together, as
	// the reader builds them: a consumer holding every call holds that.
	Record int64
}

// DefaultRecordLimits: a trial keeps at most 64 MiB of a record
// (trial.DefaultBounds) and the gateway takes requests of up to 64 MiB
// (Gateway.MaxRequestBytes); an agent resends its history with each call,
// so a long record, whole, is many times its size.
var DefaultRecordLimits = RecordLimits{Decompressed: 256 << 20, Call: 128 << 20, Record: 1 << 30}

func (l RecordLimits) orDefault() RecordLimits {
	d := DefaultRecordLimits
	if l.Decompressed > 0 {
		d.Decompressed = l.Decompressed
	}
	if l.Call > 0 {
		d.Call = l.Call
	}
	if l.Record > 0 {
		d.Record = l.Record
	}
	return d
}

// ExpansionError: a call of a record would expand past a limit. The call
// was not built.
type ExpansionError struct {
	// Call is the call's number in the record; Index its position among
	// the record's calls, from 1 (they differ in a tampered record).
	Call  int64
	Index int
	// Size is what the call's request would be, whole (Record: what the
	// record's requests would be with it); Limit the bound it is over.
	Size, Limit int64
	// Record: the limit is the whole record's, not the call's.
	Record bool
}

func (e *ExpansionError) Error() string {
	if e.Record {
		return fmt.Sprintf("call %d (the record's call #%d) would bring its requests, whole, to %d bytes, over the record's limit of %d", e.Call, e.Index, e.Size, e.Limit)
	}
	return fmt.Sprintf("call %d (the record's call #%d) names blocks that make its request %d bytes whole, over the limit of %d per call", e.Call, e.Index, e.Size, e.Limit)
}

// DecompressedError: the record is larger, decompressed, than its limit.
// The calls before the limit were read.
type DecompressedError struct{ Limit int64 }

func (e *DecompressedError) Error() string {
	return fmt.Sprintf("over %d bytes decompressed", e.Limit)
}

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
