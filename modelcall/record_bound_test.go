package modelcall

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/troupebench/troupe/modelcall/modelcalltest"
)

// tamperedRecord is a conversation record as an attacker would leave it in
// a trial folder, gzipped: one block of blockBytes, then calls lines, each
// naming it refs times. Small on disk, huge whole.
func tamperedRecord(t *testing.T, blockBytes, calls, refs int) []byte {
	t.Helper()
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "{\"block\":\"b\",\"json\":\"%s\"}\n", strings.Repeat("a", blockBytes))
	ids := strings.TrimSuffix(strings.Repeat(`"b",`, refs), ",")
	for n := range calls {
		fmt.Fprintf(&raw, "{\"call\":%d,\"api\":\"openai\",\"status\":200,\"request\":{\"messages\":{\"$blocks\":[%s]}}}\n", n+1, ids)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(raw.Bytes())
	zw.Close()
	return gz.Bytes()
}

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRecordExpansionBounded: a tampered record that names a large block
// many times is refused, before it is built, with the call and the limit;
// what the reader allocates stays near the limits, not the expansion.
func TestRecordExpansionBounded(t *testing.T) {
	for _, tc := range []struct {
		name               string
		block, calls, refs int
		lim                RecordLimits
		wantCalls          int   // read before the refusal
		wantRecord         bool  // the record's limit, not the call's
		maxAlloc           int64 // what reading may allocate
	}{
		{"one call names a 256 KiB block 4,000 times (1 GiB)", 256 << 10, 1, 4000, RecordLimits{}, 0, false, 16 << 20},
		{"4,000 calls of 25 MiB each, within the call's limit", 256 << 10, 4000, 100, RecordLimits{Record: 64 << 20}, 2, true, 200 << 20},
		{"a call limit set lower", 1 << 10, 3, 100, RecordLimits{Call: 64 << 10}, 0, false, 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tamperedRecord(t, tc.block, tc.calls, tc.refs)
			var calls []Call
			var err error
			n := allocated(func() { calls, _, err = ReadCompressedConversationLimits(bytes.NewReader(rec), tc.lim) })
			t.Logf("%d bytes gzipped; %d calls read, %d MiB allocated: %v", len(rec), len(calls), n>>20, err)
			e, ok := errors.AsType[*ExpansionError](err)
			if !ok {
				t.Fatalf("error %v, want an *ExpansionError", err)
			}
			if len(calls) != tc.wantCalls || e.Record != tc.wantRecord || e.Index != tc.wantCalls+1 || e.Call != int64(tc.wantCalls+1) || e.Size <= e.Limit {
				t.Errorf("%d calls read, then %+v", len(calls), *e)
			}
			if int64(n) > tc.maxAlloc {
				t.Errorf("reading allocated %d MiB, want under %d MiB", n>>20, tc.maxAlloc>>20)
			}
			for _, want := range []string{fmt.Sprintf("call %d", e.Call), fmt.Sprint(e.Limit)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestRecordDecompressionBounded: a gzip bomb is read only up to the
// decompressed limit, then refused.
func TestRecordDecompressionBounded(t *testing.T) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write([]byte("{\"call\":1,\"request\":{}}\n"))
	junk := bytes.Repeat([]byte(" "), 1<<20)
	for range 64 {
		zw.Write(junk)
	}
	zw.Close()
	var calls []Call
	var err error
	n := allocated(func() {
		calls, _, err = ReadCompressedConversationLimits(bytes.NewReader(gz.Bytes()), RecordLimits{Decompressed: 8 << 20})
	})
	if _, ok := errors.AsType[*DecompressedError](err); !ok || len(calls) != 1 {
		t.Errorf("%d calls, %v; want 1 call and a *DecompressedError", len(calls), err)
	}
	if n > 24<<20 {
		t.Errorf("reading allocated %d MiB", n>>20)
	}
}

// TestRecordReaderAdded: in Added mode a call's list fields hold only the
// items it added, and Repeated says how many it kept.
func TestRecordReaderAdded(t *testing.T) {
	cv := &conversation{written: map[string]bool{}}
	var rec bytes.Buffer
	for i, r := range modelcalltest.Conversation(3) {
		line, blocks := cv.split(r)
		for _, b := range blocks {
			fmt.Fprintf(&rec, "{\"block\":%q,\"json\":%s}\n", b.Block, b.JSON)
		}
		fmt.Fprintf(&rec, "{\"call\":%d,\"request\":%s}\n", i+1, line)
	}
	rr := NewRecordReader(bytes.NewReader(rec.Bytes()), RecordLimits{})
	rr.Added = true
	for i := range 3 {
		c, err := rr.Next()
		if err != nil {
			t.Fatal(err)
		}
		got := rr.Repeated()["messages"]
		want := map[int]int{0: 0, 1: 2, 2: 3}[i]
		if got != want || bytes.Count(c.Request, []byte(`"role"`)) != map[int]int{0: 2, 1: 1, 2: 1}[i] {
			t.Errorf("call %d: repeats %d (want %d), request %.200s", i+1, got, want, c.Request)
		}
	}
}

// syntheticRecord writes the 200-call conversation as the gateway does,
// with the first line and digests (verified) or without (as a record
// written before version 2 is read: the baseline of BenchmarkReadRecord).
func syntheticRecord(verified bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if verified {
		enc.Encode(recordFormat{Record: recordName, Version: recordVersion})
	}
	cv := &conversation{written: map[string]bool{}}
	for i, req := range modelcalltest.Conversation(200) {
		request, blocks := cv.split(req)
		for _, b := range blocks {
			enc.Encode(b)
		}
		c := Call{N: int64(i + 1), Time: time.Date(2026, 12, 3, 10, 0, i, 0, time.UTC), API: OpenAI, Status: 200, Request: request,
			Answer: json.RawMessage(`{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)}
		if verified {
			c.Digest = c.digest()
		}
		enc.Encode(c)
	}
	return buf.Bytes()
}

// BenchmarkReadRecord: reading a 200-call record back a call at a time,
// checking every block against its id and every call against its digest
// (verified), against reading the same record unverified (baseline).
func BenchmarkReadRecord(b *testing.B) {
	for _, v := range []struct {
		name     string
		verified bool
	}{{"baseline", false}, {"verified", true}} {
		data := syntheticRecord(v.verified)
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				rr := NewRecordReader(bytes.NewReader(data), RecordLimits{})
				rr.Added = true
				if err := rr.Each(func(Call) {}); err != nil || rr.Verified() != v.verified {
					b.Fatal(err, rr.Verified())
				}
			}
		})
	}
}
