package llm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
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

// blockMin is the size from which a non-array field is kept as a block.
const blockMin = 256

// maxAnswerKept bounds the answer kept of one call.
const maxAnswerKept = 4 << 20

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
	if st.conv == nil {
		st.conv = &conversation{written: map[string]bool{}}
	}
	cv := st.conv
	cv.calls++
	request, blocks := cv.split(c.request)
	line := Call{N: cv.calls, Time: c.start.UTC(), API: c.api, Status: c.status, Stream: c.stream, Request: request,
		AnswerOmitted: c.answerOmitted, Error: c.errMsg}
	switch answer := c.answer.Bytes(); {
	case len(answer) == 0:
	case !c.stream && json.Valid(answer):
		line.Answer = answer
	default:
		line.AnswerText = string(answer)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, b := range blocks {
		enc.Encode(b)
	}
	enc.Encode(line)
	if _, err := w.Write(t.scrubber.Scrub(buf.Bytes())); err != nil {
		t.g.Logger.Error("cannot write the conversation record", "agent", st.spec.ID, "err", err)
	}
}

// keepAnswer adds what the agent received to the call's answer, within
// maxAnswerKept; the rest is counted.
func (c *call) keepAnswer(data []byte) {
	if c.st.spec.Conversation == nil {
		return
	}
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
}

// maxRecordLine bounds one line of a record when it is read.
const maxRecordLine = 64 << 20

// ReadConversation reads an agent's conversation record (decompressed) and
// returns its calls with their requests whole. A line that is not JSON (a
// bound's marker where the middle of the record was dropped) is skipped;
// a call that names a block the record lacks keeps the reference and is
// counted in missing.
func ReadConversation(r io.Reader) (calls []Call, missing int, err error) {
	blocks := map[string]json.RawMessage{}
	last := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecordLine)
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			Block string `json:"block"`
			Call  int64  `json:"call"`
		}
		if json.Unmarshal(line, &head) != nil {
			continue
		}
		if head.Block != "" {
			var b blockLine
			if json.Unmarshal(line, &b) == nil {
				blocks[b.Block] = slices.Clone(b.JSON)
			}
			continue
		}
		var c Call
		if json.Unmarshal(line, &c) != nil || head.Call == 0 {
			continue
		}
		req, n := join(c.Request, blocks, last)
		c.Request, missing = req, missing+n
		calls = append(calls, c)
	}
	return calls, missing, sc.Err()
}

// join puts a recorded request's blocks back, counting those missing;
// last holds each list field's blocks in the previous call, and is updated.
func join(request json.RawMessage, blocks map[string]json.RawMessage, last map[string][]string) (json.RawMessage, int) {
	var req map[string]json.RawMessage
	if json.Unmarshal(request, &req) != nil {
		return request, 0
	}
	missing := 0
	get := func(id string) json.RawMessage {
		if b, ok := blocks[id]; ok {
			return b
		}
		missing++
		ref, _ := json.Marshal(blockRef{Block: id})
		return ref
	}
	for k, v := range req {
		var ref blockRef
		if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &ref) != nil || ref.Block == "" && ref.Blocks == nil && ref.Prefix == 0 {
			continue
		}
		if ref.Block != "" {
			req[k] = get(ref.Block)
			continue
		}
		prev := last[k]
		if ref.Prefix < 0 || ref.Prefix > len(prev) {
			// The call it continues was not read (a bound dropped it).
			missing += max(ref.Prefix, 0)
			ref.Prefix = min(max(ref.Prefix, 0), len(prev))
		}
		ids := append(slices.Clone(prev[:ref.Prefix]), ref.Blocks...)
		last[k] = ids
		items := make([]json.RawMessage, len(ids))
		for i, id := range ids {
			items[i] = get(id)
		}
		req[k], _ = json.Marshal(items)
	}
	out, _ := json.Marshal(req)
	return out, missing
}

// maxConversation bounds a record read back, decompressed.
const maxConversation = 1 << 30

// ReadCompressedConversation reads a record as a trial leaves it, gzipped
// (agents/<id>/llm-conversation.jsonl.gz), within a bound.
func ReadCompressedConversation(r io.Reader) (calls []Call, missing int, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, 0, err
	}
	lr := &io.LimitedReader{R: zr, N: maxConversation + 1}
	calls, missing, err = ReadConversation(lr)
	if err == nil && lr.N <= 0 {
		err = fmt.Errorf("over %d bytes decompressed", maxConversation)
	}
	return calls, missing, err
}
