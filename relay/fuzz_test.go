package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/troupebench/troupe/internal/secret"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// FuzzConnection feeds arbitrary frames (one per line of the input) to a
// connection, then checks that the relay still answers on it and that Close
// leaves no goroutine behind.
func FuzzConnection(f *testing.F) {
	for _, seed := range []string{
		`["REQ","s",{"kinds":[9],"#h":["trial-1"]}]`,
		`["EVENT",{"id":"00","pubkey":"00","created_at":0,"kind":9,"tags":[["h","trial-1"]],"content":"x","sig":"00"}]`,
		`["AUTH",{"kind":22242,"tags":[["relay","ws://x"],["challenge","c"]]}]` + "\n" + `["CLOSE","s"]`,
		`["COUNT","c",{}]` + "\n" + `["NOTICE","hi"]` + "\n" + `[]` + "\n" + `{}`,
		"[\"REQ\",\"s\",{\"kinds\":[9],\"#h\":[]},{\"limit\":0}]\n\xff\xfe",
		`["REQ","` + string(bytes.Repeat([]byte("x"), 100)) + `",{"#h":["trial-1"],"since":-1}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := runtime.NumGoroutine()
		r := New()
		r.EventRate = 0
		if err := r.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		user, a := newKey(t), newKey(t)
		if _, err := r.OpenChannel(ChannelConfig{ID: "trial-1", Members: []Member{{Pubkey: a.pk, ID: "a-1"}}, UserPubkey: user.pk, UserSecretKey: secret.New(user.sk), Orchestrator: a.pk}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, r.URL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(1 << 20)
		for _, frame := range bytes.Split(data, []byte("\n")) {
			if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
				break // the relay may end a connection that misbehaves
			}
		}
		// The connection still answers: a REQ before AUTH is refused with a
		// reason naming its subscription.
		probe, _ := json.Marshal([]any{"REQ", "probe-after-fuzz", map[string]any{"kinds": []int{9}, "#h": []string{"trial-1"}}})
		if ws.Write(ctx, websocket.MessageText, probe) == nil {
			for {
				_, msg, err := ws.Read(ctx)
				if err != nil {
					t.Fatalf("no answer to the probe: %v", err)
				}
				if bytes.Contains(msg, []byte(`"probe-after-fuzz"`)) {
					break
				}
			}
		}
		ws.CloseNow()
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		waitGoroutines(t, before)
	})
}
