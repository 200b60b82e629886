package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/contract"
)

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sk := nostr.GeneratePrivateKey()
	pk, _ := nostr.GetPublicKey(sk)
	good := map[string]string{
		contract.EnvRelayURL:         "ws://127.0.0.1:3600",
		contract.EnvPrivateKeyFile:   write("key", sk+"\n"),
		contract.EnvLLMTokenFile:     write("token", "tok-123\n"),
		contract.EnvChannel:          "trial-1",
		contract.EnvLLMBaseURL:       "http://127.0.0.1:3601/v1/",
		contract.EnvModel:            "lead-1",
		contract.EnvSystemPromptFile: write("prompt.md", "You lead.\n"),
		contract.EnvDeadline:         "2026-11-30T12:00:00Z",
		contract.EnvWorkdir:          dir,
	}
	with := func(changes map[string]string) func(string) string {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		for k, v := range changes {
			env[k] = v
		}
		return func(k string) string { return env[k] }
	}
	c, err := ConfigFromEnv(with(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicKey != pk || c.SecretKey != sk || c.LLMToken != "tok-123" || c.LLMBaseURL != "http://127.0.0.1:3601/v1" ||
		c.System != "You lead.\n" || c.MaxRounds != contract.DefaultMaxRounds || !c.Deadline.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("config %+v", c)
	}

	for _, tc := range []struct {
		name    string
		changes map[string]string
		want    []string
	}{
		{"nothing set", map[string]string{contract.EnvRelayURL: "", contract.EnvPrivateKeyFile: "", contract.EnvLLMTokenFile: "", contract.EnvChannel: "", contract.EnvLLMBaseURL: "", contract.EnvModel: "", contract.EnvSystemPromptFile: "", contract.EnvDeadline: "", contract.EnvWorkdir: ""},
			[]string{"TROUPE_RELAY_URL is not set", "TROUPE_PRIVATE_KEY_FILE is not set", "TROUPE_LLM_TOKEN_FILE is not set", "TROUPE_CHANNEL is not set",
				"TROUPE_LLM_BASE_URL is not set", "TROUPE_MODEL is not set", "TROUPE_SYSTEM_PROMPT_FILE is not set", "TROUPE_DEADLINE is not set", "TROUPE_WORKDIR is not set", "docs/stacks.md"}},
		{"bad key", map[string]string{contract.EnvPrivateKeyFile: write("badkey", "not hex")}, []string{"TROUPE_PRIVATE_KEY_FILE: the file does not hold a hex secret key"}},
		{"missing token file", map[string]string{contract.EnvLLMTokenFile: filepath.Join(dir, "absent")}, []string{"TROUPE_LLM_TOKEN_FILE: open", "no such file"}},
		{"bad deadline", map[string]string{contract.EnvDeadline: "tomorrow"}, []string{`TROUPE_DEADLINE="tomorrow" is not an RFC 3339 time`}},
		{"bad rounds", map[string]string{contract.EnvMaxRounds: "-3"}, []string{`TROUPE_MAX_ROUNDS="-3" is not a whole number`}},
		{"workdir is a file", map[string]string{contract.EnvWorkdir: good[contract.EnvLLMTokenFile]}, []string{"TROUPE_WORKDIR=", "is not a folder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromEnv(with(tc.changes))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), sk) {
				t.Errorf("the error shows the secret key")
			}
		})
	}
}

func TestCapText(t *testing.T) {
	short := strings.Repeat("x", outputCap)
	if capText(short) != short {
		t.Error("a text at the cap was changed")
	}
	long := strings.Repeat("a", outputCap) + strings.Repeat("z", outputCap)
	got := capText(long)
	if len(got) > outputCap+64 || !strings.HasPrefix(got, "aaa") || !strings.HasSuffix(got, "zzz") || !strings.Contains(got, "16384 bytes left out") {
		t.Errorf("capped text: %d bytes, %q…%q", len(got), got[:10], got[len(got)-10:])
	}
}

func TestDecodeAnswer(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string
		body   string
		budget bool
		ended  bool
		wait   time.Duration
		err    string
	}{
		{status: 200, body: `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`},
		{status: 200, body: `{"choices":[]}`, err: "an answer without choices"},
		{status: 200, body: `<html>`, err: "an answer without choices"},
		{status: 429, header: "7", body: `{"error":{"message":"slow down","type":"rate_limit"}}`, wait: 7 * time.Second, err: "429 slow down"},
		{status: 429, body: `{"error":{"message":"max_calls spent","type":"budget_exhausted"}}`, budget: true},
		{status: 429, body: `{"error":{"message":"spent","code":"budget_exhausted"}}`, budget: true},
		{status: 410, body: `{"error":{"message":"the trial has ended","type":"trial_ended"}}`, ended: true},
		{status: 503, body: "upstream down", err: "503 upstream down"},
	} {
		resp, status, wait, err := decodeAnswer(tc.status, tc.header, []byte(tc.body))
		_, budget := errors.AsType[*errBudget](err)
		_, ended := errors.AsType[*errEnded](err)
		switch {
		case ended != tc.ended:
			t.Errorf("%s: %v: a trial_ended refusal %v, want %v", tc.body, err, ended, tc.ended)
		case tc.ended:
		case tc.budget:
			if !budget {
				t.Errorf("%s: %v, want a budget refusal", tc.body, err)
			}
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || budget {
				t.Errorf("%s: %v, want %q", tc.body, err, tc.err)
			}
		default:
			if err != nil || resp == nil || len(resp.Choices) != 1 {
				t.Errorf("%s: %v", tc.body, err)
			}
		}
		if status != tc.status || wait != tc.wait {
			t.Errorf("%s: status %d wait %s", tc.body, status, wait)
		}
	}
}

// FuzzDecodeAnswer: any answer from a model API is a response or an error,
// never a panic.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(200, "", []byte(`{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"shell","arguments":"{}"}}]}}]}`))
	f.Add(429, "3", []byte(`{"error":{"type":"budget_exhausted","code":429}}`))
	f.Add(500, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{"error":null}`))
	f.Fuzz(func(t *testing.T, status int, header string, body []byte) {
		resp, _, _, err := decodeAnswer(status, header, body)
		if err == nil && (resp == nil || len(resp.Choices) == 0) {
			t.Fatalf("no error and no choice for %q", body)
		}
	})
}
