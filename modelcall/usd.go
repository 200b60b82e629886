package modelcall

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
)

// USD is an amount of US dollars that calls cost: a trial's, an agent's,
// a job's, an estimate's. Sums keep every digit a float64 holds, and
// arithmetic on them is a float64's; written as JSON an amount is rounded
// to the micro-dollar (six decimals, Micro), so that what float sums carry
// past any price (0.019972999999999998) never reaches a result or a
// report. A call's own cost (Record.CostUSD) stays a float64, written
// whole: a call can cost less than a micro-dollar, and readers add calls
// up.
type USD float64

// Micro is the amount rounded to the micro-dollar, as it is written.
func (u USD) Micro() float64 {
	v := math.Round(float64(u)*1e6) / 1e6
	if v == 0 {
		return 0 // not -0
	}
	return v
}

// String is the amount as MarshalJSON writes it (and so as fmt's %v and
// log/slog print it): 0.023799999999999998 is 0.0238.
func (u USD) String() string { return strconv.FormatFloat(u.Micro(), 'f', -1, 64) }

// MarshalJSON writes the amount rounded to the micro-dollar; NaN and the
// infinities are refused, as encoding/json refuses them in a float64.
func (u USD) MarshalJSON() ([]byte, error) {
	v := u.Micro()
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, &json.UnsupportedValueError{Value: reflect.ValueOf(u), Str: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	return []byte(u.String()), nil
}
