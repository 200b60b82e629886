package tunnel

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// Limit bounds the streams of one target.
type Limit struct {
	// Streams is how many may be open at once; one more is refused: its
	// stream is closed at once, and the in-container client sees its
	// connection closed. Zero means Options.Other's.
	Streams int
	// Idle closes a stream that has carried no byte either way for this
	// long; zero never does.
	Idle time.Duration
}

// Options bound what the container end may hold open through the host end.
// The container end is the agents': one trial's tunnel must not be able to
// take the job's relay, gateway or descriptors from the other trials, nor
// hold its own teardown up. A zero field means its default.
type Options struct {
	// Limits are per target name. A name not listed shares Other's, and its
	// streams are counted under OtherName.
	Limits map[string]Limit
	Other  Limit
	// Header is how long a new stream has to name its target.
	Header time.Duration
	// HalfOpen is how long a stream whose one direction has ended may go
	// without a byte in the other before it is closed.
	HalfOpen time.Duration
	// Logger receives the first refusal of each target and every stream
	// closed for idling; nil discards them. The counts are in Stats.
	Logger *slog.Logger
}

// OtherName counts the streams to targets Options.Limits does not list:
// the names come from the container, and the counters must not grow with
// whatever it invents.
const OtherName = "other"

// maxUnnamed bounds the streams that have not named their target yet.
const maxUnnamed = 64

// DefaultOptions are troupe's bounds: 64 relay connections (a team holds
// one per agent), 256 gateway calls and 256 proxied connections at once;
// 10 minutes of silence on a relay or proxied connection and 20 on a
// gateway call (longer than an upstream may take to answer, 15); 10 s to
// name a target and 30 s for a half-closed stream.
func DefaultOptions() Options {
	return Options{
		Limits: map[string]Limit{
			"relay": {Streams: 64, Idle: 10 * time.Minute},
			"llm":   {Streams: 256, Idle: 20 * time.Minute},
			"proxy": {Streams: 256, Idle: 10 * time.Minute},
		},
		Other:    Limit{Streams: 16, Idle: 10 * time.Minute},
		Header:   10 * time.Second,
		HalfOpen: 30 * time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Limits == nil {
		o.Limits = d.Limits
	}
	if o.Other.Streams <= 0 {
		o.Other.Streams = d.Other.Streams
	}
	if o.Other.Idle == 0 {
		o.Other.Idle = d.Other.Idle
	}
	if o.Header <= 0 {
		o.Header = d.Header
	}
	if o.HalfOpen <= 0 {
		o.HalfOpen = d.HalfOpen
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Stats counts what the host end served.
type Stats struct {
	// Streams are by target name (OtherName for names not configured).
	Streams map[string]StreamStats `json:"streams,omitempty"`
	// Unnamed counts streams closed before they named a target: too slow,
	// too long a name, or too many such at once.
	Unnamed int64 `json:"unnamed,omitempty"`
}

// StreamStats counts the streams of one target.
type StreamStats struct {
	Opened  int64 `json:"opened"`            // admitted
	Refused int64 `json:"refused,omitempty"` // over the limit: closed at once
	Peak    int   `json:"peak"`              // most open at once
	// Idle and HalfOpen count streams closed for their silence.
	Idle       int64 `json:"idle_closed,omitempty"`
	HalfOpen   int64 `json:"half_open_closed,omitempty"`
	DialFailed int64 `json:"dial_failed,omitempty"`
}

// host is the host end's admission: the open streams and the counters.
type host struct {
	opts    Options
	dial    Dialer
	mu      sync.Mutex
	open    map[string]int
	unnamed int
	stats   Stats
}

func newHost(dial Dialer, opts Options) *host {
	opts = opts.withDefaults()
	return &host{opts: opts, dial: dial, open: map[string]int{}, stats: Stats{Streams: map[string]StreamStats{}}}
}

// limit returns the counter key and the limit of a target name.
func (h *host) limit(name string) (string, Limit) {
	l, ok := h.opts.Limits[name]
	if !ok {
		return OtherName, h.opts.Other
	}
	if l.Streams <= 0 {
		l.Streams = h.opts.Other.Streams
	}
	return name, l
}

// admit takes a slot of key's, or counts and logs a refusal.
func (h *host) admit(key string, l Limit) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats.Streams[key]
	if h.open[key] >= l.Streams {
		st.Refused++
		h.stats.Streams[key] = st
		if st.Refused == 1 {
			h.opts.Logger.Warn("tunnel: refused a stream: its target has as many open as it may; further refusals are only counted",
				"target", key, "limit", l.Streams)
		}
		return false
	}
	h.open[key]++
	st.Opened++
	st.Peak = max(st.Peak, h.open[key])
	h.stats.Streams[key] = st
	return true
}

func (h *host) count(key string, f func(*StreamStats)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats.Streams[key]
	f(&st)
	h.stats.Streams[key] = st
}

func (h *host) release(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open[key]--
}

// enterUnnamed takes one of the slots of streams yet to name their target.
func (h *host) enterUnnamed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unnamed >= maxUnnamed {
		h.stats.Unnamed++
		return false
	}
	h.unnamed++
	return true
}

func (h *host) leaveUnnamed(named bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unnamed--
	if !named {
		h.stats.Unnamed++
	}
}

func (h *host) snapshot() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Streams: maps.Clone(h.stats.Streams), Unnamed: h.stats.Unnamed}
}

// ending says why splice ended a stream before both sides had.
type ending int32

const (
	endedByPeers    ending = iota // both directions ended, or one failed
	endedIdle                     // no byte either way for its Idle
	endedHalfOpen                 // one direction ended; the other fell silent
	endedByShutdown               // the session or its context ended
)

// watch tracks a stream's last byte and ends it when it has been silent
// too long.
type watch struct {
	last  atomic.Int64 // unix nanoseconds
	limit atomic.Int64 // nanoseconds of silence allowed; 0 none
	half  atomic.Bool  // a direction has ended: limit is the half-open one
	kick  chan struct{}
}

func (w *watch) touch() { w.last.Store(time.Now().UnixNano()) }

// halfOpen lowers the limit once a direction has ended.
func (w *watch) halfOpen(d time.Duration) {
	if w.half.Swap(true) {
		return
	}
	if l := w.limit.Load(); l == 0 || int64(d) < l {
		w.limit.Store(int64(d))
	}
	w.touch()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run waits until done, or until the stream has been silent longer than its
// limit, and then calls expire.
func (w *watch) run(done <-chan struct{}, expire func(ending)) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var fire <-chan time.Time
		if l := time.Duration(w.limit.Load()); l > 0 {
			left := l - time.Since(time.Unix(0, w.last.Load()))
			if left <= 0 {
				if w.half.Load() {
					expire(endedHalfOpen)
				} else {
					expire(endedIdle)
				}
				return
			}
			t.Reset(left)
			fire = t.C
		}
		select {
		case <-done:
			return
		case <-w.kick:
		case <-fire:
		}
	}
}

// activeReader notes the time of every read that brought bytes.
type activeReader struct {
	r io.Reader
	w *watch
}

func (a activeReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.w.touch()
	}
	return n, err
}

// splice copies both ways between a local connection and its stream until
// both directions have ended, then closes both. A clean end of one direction
// is passed on as a half-close, after which the other has halfOpen of
// silence left; an error, idle of silence either way (zero: no limit) or the
// end of ctx closes everything, so neither copy can outlive a dead session
// or hold its owner's Close.
func splice(ctx context.Context, a net.Conn, s *yamux.Stream, fromS io.Reader, idle, halfOpen time.Duration) ending {
	w := &watch{kick: make(chan struct{}, 1)}
	w.touch()
	w.limit.Store(int64(idle))
	var why atomic.Int32
	stop := func(e ending) {
		why.CompareAndSwap(int32(endedByPeers), int32(e))
		a.Close()
		s.SetDeadline(time.Unix(1, 0)) // wakes a blocked read or write
	}
	unhook := context.AfterFunc(ctx, func() { stop(endedByShutdown) })
	defer unhook()
	done := make(chan struct{})
	var watcher, copies sync.WaitGroup
	watcher.Go(func() { w.run(done, stop) })
	copies.Go(func() {
		_, err := io.Copy(s, activeReader{a, w})
		s.Close()
		if err != nil {
			stop(endedByPeers)
			return
		}
		w.halfOpen(halfOpen)
	})
	_, err := io.Copy(a, activeReader{fromS, w})
	if cw, ok := a.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
		w.halfOpen(halfOpen)
	} else {
		stop(endedByPeers)
	}
	copies.Wait()
	close(done)
	watcher.Wait()
	a.Close()
	return ending(why.Load())
}
