package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/troupebench/troupe/llm"
)

// TestScenarioFromTrialNamesTheTrialsIDs: answers that quote the recorded
// trial's id and its members' pubkeys (hex and npub) become a scenario
// that names them as templates, so that a trial playing it says its own;
// nothing of the recorded ids is left in it.
func TestScenarioFromTrialNamesTheTrialsIDs(t *testing.T) {
	dir := t.TempDir()
	key := func() string { pk, _ := nostr.GetPublicKey(nostr.GeneratePrivateKey()); return pk }
	userPK, leadPK := key(), key()
	userNpub, _ := nip19.EncodePublicKey(userPK)
	const trialID = "hello__team__1-5d41402a"
	write(t, filepath.Join(dir, "result.json"), `{"trial_name":"hello__team__1","troupe_trial_id":"`+trialID+`","outcome":"passed","agents":[{"id":"lead-1","role":"lead"}]}`)
	write(t, filepath.Join(dir, "relay", "members.json"), `[{"id":"user","role":"user","kind":"user","pubkey":"`+userPK+`"},{"id":"lead-1","role":"lead","kind":"orchestrator","pubkey":"`+leadPK+`"}]`)
	said := fmt.Sprintf("DONE: channel %s; I am %s; the user is %s", trialID, leadPK, userNpub)
	line := fmt.Sprintf(`{"call":1,"time":"2026-12-01T10:00:00Z","api":"openai","status":200,"request":{"messages":[{"role":"user","content":"go"}]},"answer":{"choices":[{"message":{"role":"assistant","content":%q,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send_message","arguments":%q}}]}}]}}`+"\n",
		"{{not a template}} "+said, `{"content":"`+said+`","mentions":["user"]}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(line))
	zw.Close()
	write(t, filepath.Join(dir, "agents", "lead-1", "llm-conversation.jsonl.gz"), gz.String())

	code, out, errOut := troupe(t, "scenario", "from-trial", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, old := range []string{trialID, leadPK, userNpub, userPK} {
		if strings.Contains(out, old) {
			t.Errorf("the scenario keeps the recorded %s:\n%s", old, out)
		}
	}
	for _, want := range []string{`{{.Trial}}`, `{{(.Agent \"lead-1\").Pubkey}}`, `{{.User.Npub}}`} {
		if !strings.Contains(out, want) {
			t.Errorf("the scenario does not name %s:\n%s", want, out)
		}
	}
	if _, err := llm.LoadScenario("from.yaml", []byte(out)); err != nil {
		t.Fatalf("the scenario does not load: %v\n%s", err, out)
	}
	// Its text, played in another trial, names that trial's own.
	newUser, newLead := key(), key()
	facts := llm.Facts{Trial: "hello__team__1-0badc0de", User: llm.Teammate{ID: "user", Pubkey: newUser}, Team: []llm.Teammate{{ID: "lead-1", Pubkey: newLead}}}
	newNpub, _ := nip19.EncodePublicKey(newUser)
	reply := strings.NewReplacer(trialID, `{{.Trial}}`, leadPK, `{{(.Agent "lead-1").Pubkey}}`, userNpub, `{{.User.Npub}}`).Replace(strings.ReplaceAll("{{not a template}} "+said, "{{", `{{"{{"}}`))
	var played strings.Builder
	if err := template.Must(template.New("reply").Parse(reply)).Execute(&played, facts); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("{{not a template}} DONE: channel %s; I am %s; the user is %s", facts.Trial, newLead, newNpub); played.String() != want || !strings.Contains(out, strings.ReplaceAll(reply, `"`, `\"`)) {
		t.Errorf("played %q, want %q; the scenario:\n%s", played.String(), want, out)
	}
}
