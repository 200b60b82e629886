package trialtest

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/troupebench/troupe/trialdir"
)

var (
	hex64 = regexp.MustCompile(`[0-9a-f]{64}`)
	// GatewayToken matches a gateway token, which no file of a trial or
	// job folder may hold.
	GatewayToken = regexp.MustCompile(`tg-[0-9a-f]{16,}`)
)

// ReadPlain reads a file of a trial folder, decompressed when it is a .gz
// (a conversation record): a secret compressed is still a secret.
func ReadPlain(t *testing.T, p string) []byte {
	t.Helper()
	data, _ := os.ReadFile(p)
	if !strings.HasSuffix(p, ".gz") {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return data
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Errorf("%s: %v", p, err)
	}
	return plain
}

// NoSecrets checks every file of a trial folder: no gateway token, no host
// API key, and no 64-hex string that is the secret key of any pubkey the
// trial used (its agents', as its result.json lists them, and every
// author's of its transcript).
func NoSecrets(t *testing.T, dir string) {
	t.Helper()
	pubkeys := map[string]bool{}
	for _, pk := range agentPubkeys(t, dir) {
		pubkeys[pk] = true
	}
	transcript, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(trialdir.Transcript)))
	for line := range strings.SplitSeq(string(transcript), "\n") {
		if _, ev, ok := trialdir.ParseLine([]byte(line)); ok && ev.PubKey != "" {
			pubkeys[ev.PubKey] = true
		}
	}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data := ReadPlain(t, p)
		if m := GatewayToken.Find(data); m != nil {
			t.Errorf("%s holds a gateway token (%s…)", p, m[:8])
		}
		for _, m := range hex64.FindAll(data, -1) {
			if pk, err := nostr.GetPublicKey(string(m)); err == nil && pubkeys[pk] {
				t.Errorf("%s holds the secret key of %s", p, pk)
			}
		}
		if strings.Contains(string(data), "sk-troupe-real-key-do-not-leak") {
			t.Errorf("%s holds the host's real API key", p)
		}
		return nil
	})
}

// agentPubkeys reads the agents' pubkeys from a trial's result.json, or
// ends the test.
func agentPubkeys(t *testing.T, dir string) []string {
	t.Helper()
	res, err := trialdir.ReadResult(filepath.Join(dir, trialdir.Result))
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, a := range res.Agents {
		pks = append(pks, a.Pubkey)
	}
	return pks
}
