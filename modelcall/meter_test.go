package modelcall

import (
	"strings"
	"testing"
	"time"
)

// TestRecordLines: a metering line written with Line reads back the same;
// ReadRecords skips what is no line (a bound's marker) and reads the rest.
func TestRecordLines(t *testing.T) {
	r := Record{Time: time.Date(2026, 12, 3, 10, 0, 0, 5, time.UTC), Trial: "t", Agent: "a-1", API: Anthropic, Status: 200, LatencyMS: 12.5,
		InputTokens: 100, CachedTokens: 40, OutputTokens: 7, CachedSource: CachedReported, CostUSD: 0.01, Asked: &Asked{MaxOutputTokens: 64}}
	back, ok := ParseRecord(r.Line())
	if !ok || back.Time != r.Time || back.Asked == nil || *back.Asked != *r.Asked || back.InputTokens != 100 || back.API != Anthropic {
		t.Fatalf("%v %+v", ok, back)
	}
	log := string(r.Line()) + "\n[troupe cut 120 bytes here]\n" + string(Record{Agent: "a-1", Uncounted: true}.Line()) + "\n"
	var got []Record
	if err := ReadRecords(strings.NewReader(log), func(r Record) { got = append(got, r) }); err != nil || len(got) != 2 || !got[1].Uncounted {
		t.Fatalf("%v %+v", err, got)
	}
	var tot Totals
	tot.AddUsage(got[0])
	tot.Add(Totals{Calls: 2, InputTokens: 1})
	if tot != (Totals{Calls: 2, InputTokens: 101, CachedTokens: 40, OutputTokens: 7, CostUSD: 0.01}) {
		t.Errorf("%+v", tot)
	}
}

// TestRequestArrived: a call cut while its request was read says so.
func TestRequestArrived(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want bool
	}{
		{Record{}, true},
		{Record{ErrorClass: ClassDisconnect, Error: RequestCut + "unexpected EOF"}, false},
		{Record{ErrorClass: ClassDisconnect, Error: "the agent hung up before the answer was complete"}, true},
		{Record{ErrorClass: ClassBadRequest, Error: RequestCut + "x"}, true},
	} {
		if got := tc.r.RequestArrived(); got != tc.want {
			t.Errorf("%+v: %v", tc.r, got)
		}
	}
}
