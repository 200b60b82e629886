package modelcall

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
)

// blockMin is the size from which a non-array field is kept as a block.
const blockMin = 256

// A RecordWriter writes an agent's conversation record, a call at a time:
// the record's first line (its format) before the first call, then each
// call's new blocks and the call with its digest, in one Write. What it
// writes is scrubbed before the digests are taken, so that a file
// scrubbed again holds the bytes the digests name. Not safe for
// concurrent use.
type RecordWriter struct {
	w     io.Writer
	scrub func([]byte) []byte
	cv    *conversation // nil until the first call
}

// NewRecordWriter writes a record to w, each part scrubbed by scrub (nil:
// as it is).
func NewRecordWriter(w io.Writer, scrub func([]byte) []byte) *RecordWriter {
	if scrub == nil {
		scrub = func(b []byte) []byte { return b }
	}
	return &RecordWriter{w: w, scrub: scrub}
}

// Write records one call: c as the gateway saw it, with its Request
// whole, and answer, what the agent received (a plain answer's JSON, or a
// stream's events). Write numbers the call (N), scrubs its request, answer
// and error, keeps a plain answer that is JSON as JSON (Answer) and any
// other as text (AnswerText), and sets its Digest.
func (rw *RecordWriter) Write(c Call, answer []byte) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if rw.cv == nil {
		rw.cv = &conversation{written: map[string]bool{}}
		enc.Encode(recordFormat{Record: recordName, Version: recordVersion})
	}
	cv := rw.cv
	cv.calls++
	// Scrubbed before the digests are taken: the bytes written are those
	// the digests name.
	request, blocks := cv.split(rw.scrub(c.Request))
	c.N, c.Request, c.Error = cv.calls, request, string(rw.scrub([]byte(c.Error)))
	c.Answer, c.AnswerText, c.Digest = nil, "", ""
	switch answer := rw.scrub(answer); {
	case len(answer) == 0:
	case !c.Stream && json.Valid(answer):
		// As the encoder will write it (compacted, HTML escaped), so that
		// the digest is over the bytes the record holds.
		c.Answer, _ = json.Marshal(json.RawMessage(answer))
	default:
		c.AnswerText = string(answer)
	}
	c.Digest = c.digest()
	for _, b := range blocks {
		enc.Encode(b)
	}
	enc.Encode(c)
	_, err := rw.w.Write(rw.scrub(buf.Bytes()))
	return err
}

// conversation is an agent's record being written: the blocks it holds,
// each list field's blocks in the previous call, and the calls written.
type conversation struct {
	written map[string]bool
	last    map[string][]string
	calls   int64
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
