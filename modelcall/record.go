package modelcall

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// A conversation record (package llm: AgentSpec.Conversation) holds every
// call of an agent whole: what it asked and what it was answered, the
// answer as the agent received it (a stream's events as they passed,
// scrubbed). An agent
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

// recordFormat is a record's first line (version 2 on: verified).
type recordFormat struct {
	Record  string `json:"record"`
	Version int    `json:"version"`
}

const (
	recordName    = "troupe/conversation"
	recordVersion = 2
)

// blockLine is a block of a record: a part of a request, named by the
// digest of its JSON as written (blockID).
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

// Call is one call of a conversation record: as written, its request
// holds blocks; as a RecordReader returns it, the request is whole again.
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

func blockID(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
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
