package modelcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/troupebench/troupe/modelcall/modelcalltest"
)

// TestConversationStorage: a 200-call conversation costs less than three
// times its last request, not the sum of its requests.
func TestConversationStorage(t *testing.T) {
	reqs := modelcalltest.Conversation(200)
	cv := &conversation{written: map[string]bool{}}
	total := 0
	for _, r := range reqs {
		line, blocks := cv.split(r)
		total += len(line)
		for _, b := range blocks {
			data, _ := json.Marshal(b)
			total += len(data)
		}
	}
	last := len(reqs[len(reqs)-1])
	var all int
	for _, r := range reqs {
		all += len(r)
	}
	t.Logf("record %d bytes, last request %d, all requests %d (%.1fx the last)", total, last, all, float64(total)/float64(last))
	if total >= 3*last {
		t.Errorf("the record is %d bytes, %.1f times its last request", total, float64(total)/float64(last))
	}
}

// BenchmarkConversationStorage reports the record's size as a multiple of
// the last request, and the time to split a request.
func BenchmarkConversationStorage(b *testing.B) {
	reqs := modelcalltest.Conversation(200)
	var total int
	for b.Loop() {
		cv := &conversation{written: map[string]bool{}}
		total = 0
		for _, r := range reqs {
			line, blocks := cv.split(r)
			total += len(line)
			for _, bl := range blocks {
				total += len(bl.JSON) + 40
			}
		}
	}
	b.ReportMetric(float64(total)/float64(len(reqs[len(reqs)-1])), "x-last-request")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(reqs)), "µs/call")
}

// FuzzReadConversation: a record (or anything in its place) reads into
// calls or an error, never a panic; what split writes reads back whole.
func FuzzReadConversation(f *testing.F) {
	cv := &conversation{written: map[string]bool{}}
	var seed bytes.Buffer
	for _, r := range modelcalltest.Conversation(3) {
		line, blocks := cv.split(r)
		for _, b := range blocks {
			data, _ := json.Marshal(b)
			seed.Write(append(data, '\n'))
		}
		data, _ := json.Marshal(Call{N: 1, Request: line})
		seed.Write(append(data, '\n'))
	}
	f.Add(seed.Bytes())
	f.Add([]byte(`{"call":1,"request":{"messages":{"$blocks":["x"]}}}`))
	f.Add([]byte("{\"block\":\"a\",\"json\":1}\n{\"call\":2,\"request\":{\"s\":{\"$block\":\"a\"}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		calls, missing, err := ReadConversation(bytes.NewReader(data))
		if err == nil && missing < 0 || len(calls) > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d calls, %d missing", len(calls), missing)
		}
		for _, c := range calls {
			AnswerOf(c) // whatever a record holds, never a panic
		}
		// Added mode, within small limits: what it builds stays within them.
		rr := NewRecordReader(bytes.NewReader(data), RecordLimits{Call: 4 << 10, Record: 16 << 10, Decompressed: 1 << 20})
		rr.Added = true
		var built int
		for {
			c, err := rr.Next()
			if _, ok := errors.AsType[*ExpansionError](err); ok {
				continue
			}
			if err != nil {
				break
			}
			// A request kept as it came (not an object) is the line's own.
			if built += len(c.Request); built > 16<<10+len(data) {
				t.Fatalf("built %d bytes, a request of %d", built, len(c.Request))
			}
		}
	})
}
