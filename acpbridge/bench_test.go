package acpbridge

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkBridgeTurn measures a turn as a teammate sees it: a mention
// posted on a real relay until the answer arrives there. "baseline" is a
// contract agent answering through the member package itself; "bridge" is the
// bridge with a stand-in ACP agent that answers at once, so the
// difference is the bridge's overhead per turn: the prompt, the ACP round
// trip over stdio, the session update, and the answer posted for the
// agent. Neither calls a model. The relay's rate limit is lifted: the
// turns follow each other faster than any team's.
func BenchmarkBridgeTurn(b *testing.B) {
	for _, mode := range []string{"baseline", "bridge"} {
		b.Run(mode, func(b *testing.B) {
			standIn := "quick"
			if mode == "baseline" {
				standIn = "direct"
			}
			h := newHarness(b, harnessOptions{mode: standIn, deadline: time.Hour, unlimited: true})
			// One turn first: the session's first prompt carries more.
			h.post("warm up")
			h.next(10 * time.Second)
			for i := 0; b.Loop(); i++ {
				want := "echo: task " + strconv.Itoa(i)
				h.post("task " + strconv.Itoa(i))
				if ev := h.next(10 * time.Second); ev.Content != want {
					b.Fatalf("answer %q, want %q", ev.Content, want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/turn")
		})
	}
}
