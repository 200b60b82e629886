package oneshot

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkOneShotTurn measures a turn as a teammate sees it: a mention
// posted on a real relay until the answer arrives there. "baseline" is a
// contract agent answering through the member package itself; "oneshot"
// is troupe cli running a stand-in one-shot agent (this test binary, a
// Go program that prints its answer at once) for each mention, so the
// difference is what hosting a one-shot agent adds to a turn: the prompt,
// starting and ending a process, reading its answer and posting it.
// Neither calls a model: a model's time is the same on both sides. The
// relay's rate limit is lifted: the turns follow each other faster than
// any team's.
func BenchmarkOneShotTurn(b *testing.B) {
	for _, mode := range []string{"baseline", "oneshot"} {
		b.Run(mode, func(b *testing.B) {
			standIn := "quick"
			if mode == "baseline" {
				standIn = "direct"
			}
			h := newHarness(b, harnessOptions{mode: standIn, unlimited: true, flags: Flags{History: 10}})
			h.post("warm up")
			h.next(h.pk, 10*time.Second)
			for i := 0; b.Loop(); i++ {
				want := "echo: task " + strconv.Itoa(i)
				h.post("task " + strconv.Itoa(i))
				if ev := h.next(h.pk, 10*time.Second); ev.Content != want {
					b.Fatalf("answer %q, want %q", ev.Content, want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/turn")
		})
	}
}
