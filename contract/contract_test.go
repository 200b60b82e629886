package contract

import (
	"fmt"
	"strings"
	"testing"
)

func TestGenerationFromEnv(t *testing.T) {
	base := map[string]string{}
	for k, v := range map[string]string{EnvThinkingEffort: "xhigh", EnvMaxOutputTokens: "5000", EnvCompactAtPercent: "80",
		EnvContextWindowTokens: "200000", EnvGenerationExtra: `{"top_p":0.9}`} {
		base[k] = v
	}
	cfg, errs := readGeneration(func(k string) string { return base[k] })
	if len(errs) != 0 || fmt.Sprintf("%+v", cfg) != "{ThinkingEffort:xhigh MaxOutputTokens:5000 ContextWindowTokens:200000 CompactAtPercent:80 CompactAtTokens:0 Extra:map[top_p:0.9]}" {
		t.Errorf("%+v %v", cfg, errs)
	}
	bad := map[string]string{EnvMaxOutputTokens: "-1", EnvGenerationExtra: "[1]"}
	_, errs = readGeneration(func(k string) string { return bad[k] })
	if len(errs) != 2 || !strings.Contains(errs[0].Error()+errs[1].Error(), "TROUPE_MAX_OUTPUT_TOKENS=\"-1\" is not a whole number above 0") {
		t.Errorf("%v", errs)
	}
}
