package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/troupebench/troupe/internal/syncbuf"
	"github.com/troupebench/troupe/relay"
)

func TestRelayCommand(t *testing.T) {
	dir := isolate(t)
	transcript := filepath.Join(dir, "transcript.jsonl")
	lead := nostr.GeneratePrivateKey()
	leadPK, _ := nostr.GetPublicKey(lead)
	npub, _ := nip19.EncodePublicKey(leadPK)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"relay", "--addr", "127.0.0.1:0", "--channel", "dev", "--member", npub, "--transcript", transcript}, out, out)
	}()
	for !strings.Contains(out.String(), "channel dev open") {
		select {
		case code := <-done:
			t.Fatalf("relay exited with %d: %s", code, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	url := regexp.MustCompile(`relay listening on (ws://\S+)`).FindStringSubmatch(out.String())[1]

	// A member authenticates and posts; the transcript line appears on
	// stdout. (A raw websocket client: go-nostr's client races with itself
	// on disconnect, which -race reports; the relay package tests it.)
	ws, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	exchange := func(msg any, wantLabel string) []json.RawMessage {
		t.Helper()
		b, _ := json.Marshal(msg)
		if err := ws.Write(t.Context(), websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		for {
			_, data, err := ws.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var env []json.RawMessage
			json.Unmarshal(data, &env)
			if len(env) > 0 && string(env[0]) == `"`+wantLabel+`"` {
				return env
			}
		}
	}
	var challenge string
	json.Unmarshal(exchange([]any{"REQ", "s", map[string]any{"kinds": []int{9}, "#h": []string{"dev"}}}, "AUTH")[1], &challenge)
	auth := nostr.Event{Kind: nostr.KindClientAuthentication, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", url}, {"challenge", challenge}}}
	auth.Sign(lead)
	if ok := exchange([]any{"AUTH", auth}, "OK"); string(ok[2]) != "true" {
		t.Fatalf("AUTH refused: %s", ok[3])
	}
	ev := nostr.Event{Kind: 9, CreatedAt: nostr.Now(), Content: "hello from the lead", Tags: nostr.Tags{{"h", "dev"}}}
	ev.Sign(lead)
	if ok := exchange([]any{"EVENT", ev}, "OK"); string(ok[2]) != "true" {
		t.Fatalf("EVENT refused: %s", ok[3])
	}

	cancel() // as Ctrl+C does
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "stopping relay") {
		t.Errorf("output:\n%s", out.String())
	}
	if data, err := os.ReadFile(transcript); err != nil || !strings.Contains(string(data), `"content":"hello from the lead"`) {
		t.Errorf("transcript %q: %v", data, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "--member", npub}, "--member needs --channel"},
		{[]string{"relay", "--channel", "x"}, "--channel needs at least one --member"},
		{[]string{"relay", "--channel", "x", "--member", "nope"}, "64 hex digits or an npub"},
		{[]string{"relay", "--channel", "x", "--member", "lead-1:lead:boss=" + npub}, `kind "boss" is neither orchestrator nor worker`},
		{[]string{"relay", "--channel", "x", "--member", "a:b:c:d=" + npub}, "ID[:ROLE[:KIND]]=KEY"},
		{[]string{"relay", "--channel", "x", "--member", "lead-1:lead"}, "--member lead-1:lead has no key: give ID=KEY (a key is 64 hex digits or an npub), or --keys-dir to generate one"},
	} {
		if code, _, errOut := troupe(t, tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d %s", tt.args, code, errOut)
		}
	}
}

func TestParseMember(t *testing.T) {
	pk := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		in   string
		want relay.Member
	}{
		{pk, relay.Member{Pubkey: pk, ID: "member-3"}},
		{"lead-1=" + pk, relay.Member{Pubkey: pk, ID: "lead-1"}},
		{"worker-1:implementer=" + strings.ToUpper(pk), relay.Member{Pubkey: pk, ID: "worker-1", Role: "implementer"}},
		{"lead-1:lead:orchestrator=" + pk, relay.Member{Pubkey: pk, ID: "lead-1", Role: "lead", Kind: "orchestrator"}},
	} {
		got, sk, err := parseMember(tt.in, 2)
		if err != nil || got != tt.want || sk != "" {
			t.Errorf("%s: %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	m, sk, err := parseMember("lead-1:lead:orchestrator", 0)
	if pk, _ := nostr.GetPublicKey(sk); err != nil || m.ID != "lead-1" || m.Kind != "orchestrator" || pk != m.Pubkey {
		t.Errorf("generated member %+v, key %q, %v", m, sk, err)
	}
}
