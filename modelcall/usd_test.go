package modelcall

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

// sevenCalls is what seven calls of $0.0034 add up to in a float64:
// 0.023799999999999998, the noise a sum of costs carries.
func sevenCalls() USD {
	var t Totals
	for range 7 {
		t.AddUsage(Record{CostUSD: 0.0034})
	}
	return t.CostUSD
}

// TestUSDIsWrittenToTheMicroDollar: an amount is written rounded to six
// decimals, as JSON, with fmt and in logs; the sum itself keeps every
// digit.
func TestUSDIsWrittenToTheMicroDollar(t *testing.T) {
	if sum := sevenCalls(); float64(sum) != 0.023799999999999998 {
		t.Fatalf("the sum changed: %v", float64(sum))
	}
	for _, tc := range []struct {
		v    USD
		want string
	}{
		{sevenCalls(), "0.0238"},
		{0.019972999999999998, "0.019973"},
		{0.1 + 0.2, "0.3"},
		{0.0000004, "0"},
		{-0.0000004, "0"}, // not -0
		{0.0000005, "0.000001"},
		{12345.6789012345, "12345.678901"},
		{0, "0"},
		{2, "2"},
	} {
		data, err := json.Marshal(struct {
			Cost USD `json:"cost_usd"`
		}{tc.v})
		if want := `{"cost_usd":` + tc.want + `}`; err != nil || string(data) != want {
			t.Errorf("%v: %s, %v; want %s", float64(tc.v), data, err, want)
		}
		if got := fmt.Sprint(tc.v); got != tc.want {
			t.Errorf("%v prints %s, want %s", float64(tc.v), got, tc.want)
		}
	}
	var back struct{ Cost USD }
	if err := json.Unmarshal([]byte(`{"Cost":0.0238}`), &back); err != nil || back.Cost != 0.0238 {
		t.Errorf("read back %v, %v", back.Cost, err)
	}
	for _, bad := range []USD{USD(math.NaN()), USD(math.Inf(1))} {
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("%v written without an error", bad)
		}
	}
}
