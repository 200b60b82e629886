package llm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/modelcall"
)

// finish prices the call, writes its record and settles the budgets, once.
// The meter calls it as the response completes; ServeHTTP's deferred call
// covers every other ending, even the proxy aborting a cut stream by
// panicking.
func (g *Gateway) finish(c *call) {
	if c.settled {
		return
	}
	c.settled = true
	st := c.st
	if c.countTokens { // not a model call: no record, no charge
		g.Logger.Debug("count_tokens", "trial", st.trial.spec.ID, "agent", st.spec.ID, "endpoint", st.endpoint.Name, "status", c.status, "error", c.errMsg)
		return
	}
	if c.errClass == modelcall.ClassTrialEnded {
		// After the trial's end decision: no part of the trial, in no
		// file of it. Whether its agent asks it before it is swept is a
		// matter of timing, and the trial's figures are not: the
		// gateway's log says it.
		g.Logger.Info("call after the trial's end refused", "trial", st.trial.spec.ID, "agent", st.spec.ID, "endpoint", st.endpoint.Name)
		return
	}
	end := g.Now()
	r := modelcall.Record{
		Time: c.start.UTC(), Trial: st.trial.spec.ID, Agent: st.spec.ID, Endpoint: st.endpoint.Name,
		Model: st.endpoint.Model, API: c.api, Stream: c.stream, Status: c.status,
		LatencyMS: ms(end.Sub(c.start)), ErrorClass: c.errClass, Error: c.errMsg, RetryAfter: c.retryAfter, Fault: c.fault,
		Asked: c.asked, Replayed: c.replayed != nil, Uncounted: !c.admitted,
		Retries: c.retries, RetryWaitMS: ms(c.retryWait),
	}
	if !c.firstByte.IsZero() {
		r.TTFBMS = ms(c.firstByte.Sub(c.start))
	}
	if c.status < 400 && c.errClass == "" && !c.complete {
		r.ErrorClass, r.Error = modelcall.ClassDisconnect, "the response ended before it was complete"
		if cause := context.Cause(c.ctx); cause != nil {
			r.Error = cause.Error() + " before the answer was complete"
		}
	}
	if c.usageSeen || c.usage != (modelcall.Usage{}) { // a stream's usage is read event by event
		cost, cached, source := Cost(c.usage, st.price)
		r.InputTokens, r.CachedTokens, r.OutputTokens, r.CostUSD, r.CachedSource = c.usage.Input, cached, c.usage.Output, cost, source
		r.ReasoningTokens = c.usage.Reasoning
	}
	if r.ErrorClass == modelcall.ClassBudgetExhausted {
		r.Status = http.StatusTooManyRequests
	}
	st.settle(r)
	st.trial.reportUnanswerable(c)
	st.endOfAnswer(c)
	if st.replay != nil {
		st.trial.mu.Lock()
		st.countReplay(c, r.CostUSD)
		st.trial.mu.Unlock()
	}
	if st.spec.Conversation != nil {
		st.trial.mu.Lock()
		st.recordConversation(c)
		st.trial.mu.Unlock()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// errStreamCut ends a stream cut by a fault.
var errStreamCut = errors.New("stream cut by an injected fault")

// meter passes a response body through while reading its usage, and
// settles the call before the client can see that the response is
// complete, so a spent budget is known before the agent's next call. A
// server-sent event stream is re-framed so that each Read returns exactly one
// event, which the proxy then writes and flushes on its own; a plain body is
// read whole first (it is small), priced, then served.
type meter struct {
	resp    *http.Response
	body    io.ReadCloser
	br      *bufio.Reader
	c       *call
	sse     bool
	scrub   *secret.Scrubber
	settle  func()
	pending []byte
	events  int
	rest    bool // a plain body larger than maxCapture: the rest passes through
}

const maxCapture = 16 << 20

func (m *meter) Read(p []byte) (int, error) {
	if !m.sse {
		return m.readPlain(p)
	}
	if len(m.pending) == 0 {
		if m.c.cutAfter > 0 && m.events >= m.c.cutAfter {
			m.c.errClass, m.c.errMsg = modelcall.ClassDisconnect, errStreamCut.Error()
			return 0, errStreamCut
		}
		event, err := m.readEvent()
		if len(event) == 0 {
			if errors.Is(err, io.EOF) && !m.c.complete && m.c.usage != (modelcall.Usage{}) {
				// Some OpenAI-compatible servers end with the usage event
				// and no [DONE]: that is complete too.
				m.c.complete = true
				m.settle()
			}
			return 0, err
		}
		m.events++
		event = m.scrub.Scrub(event)
		m.c.keepAnswer(event)
		done, errMsg := modelcall.InspectEvent(m.c.api, event, &m.c.usage)
		if errMsg != "" {
			m.c.errMsg = errMsg
			if m.c.errClass == "" {
				m.c.errClass = classifyStreamError(errMsg)
			}
		}
		if done && !m.c.complete {
			m.c.complete = true
			m.settle()
		}
		m.pending = event
	}
	n := copy(p, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}

func (m *meter) readPlain(p []byte) (int, error) {
	if len(m.pending) > 0 {
		n := copy(p, m.pending)
		m.pending = m.pending[n:]
		return n, nil
	}
	if !m.rest {
		return 0, io.EOF
	}
	n, err := m.br.Read(p)
	if err == io.EOF {
		m.c.complete = true
	}
	return n, err
}

// readEvent reads lines up to and including the blank line that ends an
// event.
func (m *meter) readEvent() ([]byte, error) {
	var ev []byte
	for {
		line, err := m.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			ev = append(ev, line...)
			continue
		}
		ev = append(ev, line...)
		if err != nil {
			return ev, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return ev, nil
		}
	}
}

// Close ends the body. A stream the proxy stopped passing on (its agent
// hung up) is read on until the usage the provider reports at its end, for
// the tokens are billed either way: until the call's context ends, at most
// DrainGrace after the hang-up (see call.end).
func (m *meter) Close() error {
	if m.sse && !m.c.complete && m.c.errClass == "" && m.br != nil {
		for {
			event, err := m.readEvent()
			if len(event) > 0 {
				if done, _ := modelcall.InspectEvent(m.c.api, event, &m.c.usage); done {
					break
				}
			}
			if err != nil {
				break
			}
		}
		m.c.errClass, m.c.errMsg = modelcall.ClassDisconnect, "the agent hung up before the answer was complete"
		if cause := context.Cause(m.c.ctx); cause != nil {
			m.c.errMsg = cause.Error() + " before the answer was complete"
		}
	}
	if m.br != nil {
		m.br.Reset(nil)
		readers.Put(m.br)
		m.br = nil
	}
	err := m.body.Close()
	m.resp.Trailer = nil // the proxy would pass them on unannounced
	return err
}

// Buffers are reused across calls: two 32 KiB buffers per response would
// otherwise be most of the gateway's garbage.
var (
	readers     = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	copyBuffers = &bufferPool{}
)

// bufferPool is httputil.BufferPool over a sync.Pool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v := b.p.Get(); v != nil {
		return *v.(*[]byte)
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// classifyStreamError maps an error event inside a stream to a class.
func classifyStreamError(msg string) string {
	switch {
	case strings.Contains(msg, "overloaded"):
		return modelcall.ClassOverloaded
	case strings.Contains(msg, "rate_limit"):
		return modelcall.ClassRateLimit
	}
	return modelcall.ClassUpstream5xx
}
