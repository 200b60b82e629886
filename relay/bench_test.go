package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupebench/troupe/internal/secret"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
)

const benchSubscribers = 100

// fanout is a server that takes messages from one publisher connection and
// delivers them to every subscriber connection: either troupe's relay or the
// baseline, a bare websocket broadcaster with the same one-reader,
// one-writer-per-connection design and none of the Nostr work.
type fanout struct {
	url       string
	publisher *websocket.Conn
	subs      []*benchSub
	// frame returns the i-th message the publisher sends.
	frame func(i int) []byte
	close func()
}

// benchSub reads one subscriber's deliveries and records their latency.
type benchSub struct {
	ws        *websocket.Conn
	latencies []time.Duration
	got       atomic.Int64 // index of the last message received, +1
	done      chan struct{}
}

// sendTimes holds when each message was sent, for latency.
type sendTimes struct {
	mu sync.Mutex
	t  []time.Time
}

func (s *sendTimes) set(i int, t time.Time) {
	s.mu.Lock()
	s.t[i] = t
	s.mu.Unlock()
}

func (s *sendTimes) get(i int) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t[i]
}

// readLoop parses the message index out of "content":"#<i>" without decoding
// the JSON, so the subscribers' cost is the same on both servers.
func (s *benchSub) readLoop(sent *sendTimes, batch chan<- struct{}, batchSize int) {
	defer close(s.done)
	marker := []byte(`"content":"#`)
	for {
		_, msg, err := s.ws.Read(context.Background())
		if err != nil {
			return
		}
		at := bytes.Index(msg, marker)
		if at < 0 {
			continue
		}
		rest := msg[at+len(marker):]
		end := bytes.IndexByte(rest, '"')
		i, err := strconv.Atoi(string(rest[:end]))
		if err != nil {
			continue
		}
		s.latencies = append(s.latencies, time.Since(sent.get(i)))
		s.got.Store(int64(i + 1))
		if batch != nil && (i+1)%batchSize == 0 {
			batch <- struct{}{}
		}
	}
}

// signedEvents makes n distinct channel messages, signed on every core.
func signedEvents(b *testing.B, k key, n int) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	var wg sync.WaitGroup
	workers := 2
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				ev := nostr.Event{Kind: KindChannelMessage, CreatedAt: nostr.Now(), Content: "#" + strconv.Itoa(i), Tags: nostr.Tags{{"h", "bench"}}}
				if err := ev.Sign(k.sk); err != nil {
					panic(err)
				}
				out[i], _ = json.Marshal([]any{"EVENT", ev})
			}
		})
	}
	wg.Wait()
	return out
}

func dialBench(b *testing.B, url string) *websocket.Conn {
	b.Helper()
	ws, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	return ws
}

// startRelayFanout opens a relay with one channel whose members are the
// publisher and the subscribers, all authenticated and subscribed.
func startRelayFanout(b *testing.B, frames [][]byte, pub key) *fanout {
	b.Helper()
	r := New()
	r.EventRate = 0
	r.MaxStoredEvents = 1000
	if err := r.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	user := newKey(b)
	subKeys := make([]key, benchSubscribers)
	members := []Member{{Pubkey: pub.pk, ID: "pub-1"}}
	for i := range subKeys {
		subKeys[i] = newKey(b)
		members = append(members, Member{Pubkey: subKeys[i].pk, ID: fmt.Sprintf("sub-%d", i+1)})
	}
	if _, err := r.OpenChannel(ChannelConfig{ID: "bench", Members: members, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: pub.pk}); err != nil {
		b.Fatal(err)
	}
	f := &fanout{url: r.URL(), frame: func(i int) []byte { return frames[i] }}
	f.publisher = benchLogin(b, r.URL(), pub, false)
	for _, k := range subKeys {
		f.subs = append(f.subs, &benchSub{ws: benchLogin(b, r.URL(), k, true), done: make(chan struct{})})
	}
	f.close = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
	}
	return f
}

// benchLogin authenticates a raw connection and, for a subscriber,
// subscribes it to the channel.
func benchLogin(b *testing.B, url string, k key, subscribe bool) *websocket.Conn {
	b.Helper()
	ctx := context.Background()
	ws := dialBench(b, url)
	req, _ := json.Marshal([]any{"REQ", "s", map[string]any{"kinds": []int{9}, "#h": []string{"bench"}, "limit": 0}})
	ws.Write(ctx, websocket.MessageText, req)
	var challenge string
	for challenge == "" {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var env []json.RawMessage
		json.Unmarshal(msg, &env)
		if len(env) == 2 && string(env[0]) == `"AUTH"` {
			json.Unmarshal(env[1], &challenge)
		}
	}
	auth := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", url}, {"challenge", challenge}}}
	auth.Sign(k.sk)
	msg, _ := json.Marshal([]any{"AUTH", auth})
	ws.Write(ctx, websocket.MessageText, msg)
	waitFor(b, ws, `"OK"`)
	if subscribe {
		ws.Write(ctx, websocket.MessageText, req)
		waitFor(b, ws, `"EOSE"`)
	}
	return ws
}

func waitFor(b *testing.B, ws *websocket.Conn, label string) {
	b.Helper()
	for {
		_, msg, err := ws.Read(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if bytes.HasPrefix(msg, []byte("["+label)) {
			if bytes.Contains(msg, []byte("false")) && label == `"OK"` {
				b.Fatalf("refused: %s", msg)
			}
			return
		}
	}
}

// startBaselineFanout runs the bare broadcaster on httptest.
func startBaselineFanout(b *testing.B, frames [][]byte) *fanout {
	b.Helper()
	type peer struct{ send chan []byte }
	var mu sync.Mutex
	var peers []*peer
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.SetReadLimit(1 << 20)
		p := &peer{send: make(chan []byte, 4096)}
		if r.URL.Query().Get("role") == "sub" {
			mu.Lock()
			peers = append(peers, p)
			mu.Unlock()
		}
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-p.send:
					if ws.Write(ctx, websocket.MessageText, m) != nil {
						return
					}
				}
			}
		})
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				ws.CloseNow()
				return
			}
			mu.Lock()
			for _, q := range peers {
				select {
				case q.send <- msg:
				default:
				}
			}
			mu.Unlock()
		}
	}))
	url := "ws" + srv.URL[len("http"):]
	f := &fanout{url: url, frame: func(i int) []byte { return frames[i] }}
	f.publisher = dialBench(b, url+"?role=pub")
	for range benchSubscribers {
		f.subs = append(f.subs, &benchSub{ws: dialBench(b, url+"?role=sub"), done: make(chan struct{})})
	}
	// The broadcaster has no EOSE to wait for: wait until every subscriber
	// is registered.
	for {
		mu.Lock()
		n := len(peers)
		mu.Unlock()
		if n == benchSubscribers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.close = func() { cancel(); srv.CloseClientConnections(); srv.Close(); wg.Wait() }
	return f
}

type fanoutStarter func(b *testing.B, frames [][]byte, pub key) *fanout

var fanoutServers = []struct {
	name  string
	start fanoutStarter
}{
	{"baseline", func(b *testing.B, frames [][]byte, _ key) *fanout { return startBaselineFanout(b, frames) }},
	{"relay", startRelayFanout},
}

// BenchmarkFanoutThroughput: one publisher sends as fast as the slowest of
// 100 subscribers takes deliveries, in batches of 200; reports events/s
// accepted and delivered to all, and deliveries/s.
func BenchmarkFanoutThroughput(b *testing.B) {
	const batchSize = 200
	for _, srv := range fanoutServers {
		b.Run(srv.name, func(b *testing.B) {
			pub := newKey(b)
			n := max(b.N/batchSize, 1) * batchSize
			frames := signedEvents(b, pub, n)
			f := srv.start(b, frames, pub)
			sent := &sendTimes{t: make([]time.Time, n)}
			batch := make(chan struct{}, benchSubscribers)
			for _, s := range f.subs {
				go s.readLoop(sent, batch, batchSize)
			}
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for i := range n {
				sent.set(i, time.Now())
				if err := f.publisher.Write(ctx, websocket.MessageText, f.frame(i)); err != nil {
					b.Fatal(err)
				}
				if (i+1)%batchSize == 0 {
					for range f.subs {
						<-batch
					}
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(n*benchSubscribers)/elapsed.Seconds(), "deliveries/s")
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/event")
			closeFanout(f)
		})
	}
}

// BenchmarkFanoutLatency: one publisher sends at a fixed rate; reports the
// p50 and p99 time from send to delivery over all 100 subscribers.
func BenchmarkFanoutLatency(b *testing.B) {
	for _, rate := range []int{100, 500} {
		for _, srv := range fanoutServers {
			b.Run(fmt.Sprintf("rate=%d/%s", rate, srv.name), func(b *testing.B) {
				pub := newKey(b)
				n := max(b.N, 200)
				frames := signedEvents(b, pub, n)
				f := srv.start(b, frames, pub)
				sent := &sendTimes{t: make([]time.Time, n)}
				for _, s := range f.subs {
					go s.readLoop(sent, nil, 0)
				}
				ctx := context.Background()
				tick := time.NewTicker(time.Second / time.Duration(rate))
				defer tick.Stop()
				b.ResetTimer()
				for i := range n {
					<-tick.C
					sent.set(i, time.Now())
					if err := f.publisher.Write(ctx, websocket.MessageText, f.frame(i)); err != nil {
						b.Fatal(err)
					}
				}
				deadline := time.Now().Add(30 * time.Second)
				for _, s := range f.subs {
					for s.got.Load() < int64(n) && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
				b.StopTimer()
				closeFanout(f)
				var all []time.Duration
				for _, s := range f.subs {
					all = append(all, s.latencies...)
				}
				if len(all) < n*benchSubscribers {
					b.Fatalf("%d of %d deliveries arrived", len(all), n*benchSubscribers)
				}
				slices.Sort(all)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// BenchmarkVerify is the cost of checking one event's id and signature, the
// work the relay must do per event and the baseline skips.
func BenchmarkVerify(b *testing.B) {
	k := newKey(b)
	ev := nostr.Event{Kind: KindChannelMessage, CreatedAt: nostr.Now(), Content: "#1", Tags: nostr.Tags{{"h", "bench"}}}
	ev.Sign(k.sk)
	for b.Loop() {
		if ok, _ := ev.CheckSignature(); !ok || !ev.CheckID() {
			b.Fatal("does not verify")
		}
	}
}

func closeFanout(f *fanout) {
	f.publisher.CloseNow()
	for _, s := range f.subs {
		s.ws.CloseNow()
		<-s.done
	}
	f.close()
}
