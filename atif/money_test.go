package atif

import (
	"regexp"
	"strings"
	"testing"

	"github.com/troupebench/troupe/modelcall"
)

// TestMarshalWritesMoneyToTheMicroDollar: a trajectory's costs, a step's
// and their sum, are written to the micro-dollar, whatever float noise
// the sum carries (0.1 + 0.2 is 0.30000000000000004).
func TestMarshalWritesMoneyToTheMicroDollar(t *testing.T) {
	steps := []Step{
		{StepID: 1, Source: SourceAgent, Metrics: &Metrics{CostUSD: ptr(modelcall.USD(0.1))}},
		{StepID: 2, Source: SourceAgent, Metrics: &Metrics{CostUSD: ptr(modelcall.USD(0.2))}},
		{StepID: 3, Source: SourceAgent, Metrics: &Metrics{CostUSD: ptr(modelcall.USD(0.00018510000000000002))}},
	}
	data, err := Marshal(Trajectory{SchemaVersion: SchemaVersion, Agent: Agent{Name: "a", Version: "1"}, Steps: steps, FinalMetrics: finalMetrics(steps, nil, 3)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`"(\w*cost_usd)": ([^,\n]+)`).FindAllStringSubmatch(string(data), -1) {
		got = append(got, m[1]+"="+m[2])
	}
	if want := "cost_usd=0.1 cost_usd=0.2 cost_usd=0.000185 total_cost_usd=0.300185"; strings.Join(got, " ") != want {
		t.Errorf("the trajectory's amounts: %s\nwant %s", strings.Join(got, " "), want)
	}
}
