package personas

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestLibrary(t *testing.T) {
	want := []string{"critic", "lead", "peer", "solo", "worker"}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("personas %v, want %v", got, want)
	}
	for _, p := range List() {
		text := string(p.Text)
		if !strings.HasPrefix(text, "# ") || p.Summary == "" {
			t.Errorf("%s: no heading to summarise", p.Name)
		}
		// Every persona states the completion protocol.
		if !strings.Contains(text, "Only the orchestrator ends a trial") || !strings.Contains(text, "`DONE:`") {
			t.Errorf("%s does not state the completion protocol", p.Name)
		}
		if !strings.Contains(text, "send_message") {
			t.Errorf("%s does not say how to speak (send_message)", p.Name)
		}
		if len(p.SHA256) != 64 {
			t.Errorf("%s: digest %q", p.Name, p.SHA256)
		}
	}
	for _, name := range []string{"nope", "", "../personas", "lead.md"} {
		if _, err := Get(name); !errors.Is(err, ErrUnknown) {
			t.Errorf("Get(%q) = %v, want ErrUnknown", name, err)
		}
	}
}

func TestCompose(t *testing.T) {
	team := []Member{
		{ID: "orch-1", Role: "lead", Kind: "orchestrator", Pubkey: strings.Repeat("a", 64)},
		{ID: "worker-1", Role: "implementer", Kind: "worker", Pubkey: strings.Repeat("b", 64)},
		{ID: "worker-2", Role: "implementer | tester\nsecond line", Kind: "worker", Pubkey: strings.Repeat("c", 64)},
	}
	user := Member{ID: "user", Kind: "user", Pubkey: strings.Repeat("d", 64)}
	lead, _ := Get("lead")
	solo, _ := Get("solo")
	tests := []struct {
		golden  string
		persona []byte
		ctx     Context
	}{
		{"team-lead", lead.Text, Context{Self: team[0], Channel: "trial-1234", User: user, Team: team}},
		{"team-worker", []byte("Persona without a final newline."), Context{Self: team[1], Channel: "trial-1234", User: user, Team: team}},
		{"solo", solo.Text, Context{Self: Member{ID: "solo-1", Role: "solo", Kind: "orchestrator", Pubkey: strings.Repeat("e", 64)}, Channel: "trial-9", User: user, Team: []Member{{ID: "solo-1", Role: "solo", Kind: "orchestrator", Pubkey: strings.Repeat("e", 64)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			got := Compose(tt.persona, tt.ctx)
			if again := Compose(tt.persona, tt.ctx); !bytes.Equal(got, again) {
				t.Fatal("Compose is not deterministic")
			}
			golden := filepath.Join("testdata", tt.golden+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./personas -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("prompt differs from %s:\n%s", golden, got)
			}
			if bytes.Contains(got, []byte("| "+tt.ctx.Self.ID+" |")) {
				t.Error("the agent is listed among its own teammates")
			}
		})
	}
}
