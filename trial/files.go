package trial

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/troupebench/troupe/internal/capfile"
	"github.com/troupebench/troupe/internal/secret"
)

// Bounds limit what a trial writes into its folder where untrusted code
// decides how much: agents, their tools, verifiers (docs/run.md, "Bounds").
// Each file keeps its first Head and its last Tail bytes and says in the
// middle how much it dropped; the result lists every file that was cut.
type Bounds struct {
	// AgentOutput bounds each agent's stdout.log and stderr.log.
	AgentOutput capfile.Limit
	// Calls bounds each agent's llm-calls.jsonl.
	Calls capfile.Limit
	// Conversation bounds each agent's llm-conversation.jsonl (before it is
	// compressed): its model calls whole.
	Conversation capfile.Limit
	// Transcript and Audit bound relay/transcript.jsonl and audit.jsonl.
	Transcript, Audit capfile.Limit
	// TrialLog bounds trial.log.
	TrialLog capfile.Limit
	// VerifierOutput bounds verifier/test-stdout.txt and test-stderr.txt.
	VerifierOutput capfile.Limit
	// Logs is how many bytes of files the verifier's /logs/verifier and the
	// agents' /logs/artifacts may bring into the folder, together.
	Logs int64
}

// DefaultBounds keep a trial folder under 24 MiB per agent and 128 MiB
// more, however its agents and verifier behave.
var DefaultBounds = Bounds{
	AgentOutput:    capfile.Limit{Head: 4 << 20, Tail: 4 << 20},
	Calls:          capfile.Limit{Head: 4 << 20, Tail: 4 << 20, Lines: true},
	Conversation:   capfile.Limit{Head: 32 << 20, Tail: 32 << 20, Lines: true},
	Transcript:     capfile.Limit{Head: 16 << 20, Tail: 16 << 20, Lines: true},
	Audit:          capfile.Limit{Head: 4 << 20, Tail: 4 << 20, Lines: true},
	TrialLog:       capfile.Limit{Head: 4 << 20, Tail: 4 << 20},
	VerifierOutput: capfile.Limit{Head: 4 << 20, Tail: 4 << 20},
	Logs:           64 << 20,
}

// sink is a file of the trial folder that untrusted bytes flow into: they
// are scrubbed of the trial's secrets, then bounded. The secrets are known
// only once the trial has minted them (its gateway tokens come with the
// gateway's grant, which needs the files to write to): scrubWith arms the
// sink before any agent runs.
type sink struct {
	file *capfile.File
	mu   sync.Mutex
	sw   *secret.Writer // nil until armed
}

func newSink(path string, lim capfile.Limit) (*sink, error) {
	f, err := capfile.Create(path, lim)
	if err != nil {
		return nil, err
	}
	return &sink{file: f}, nil
}

func (s *sink) scrubWith(sc *secret.Scrubber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sw = sc.Writer(s.file)
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	w := io.Writer(s.file)
	if s.sw != nil {
		w = s.sw
	}
	s.mu.Unlock()
	return w.Write(p)
}

// Sync lets the relay sync the transcript when the channel closes.
func (s *sink) Sync() error { return s.file.Sync() }

func (s *sink) Name() string { return s.file.Name() }

// Close writes what the scrubber held back, then closes the bounded file.
func (s *sink) Close() error {
	s.mu.Lock()
	sw := s.sw
	s.mu.Unlock()
	var err error
	if sw != nil {
		err = sw.Flush()
	}
	return errors.Join(err, s.file.Close())
}

// openSink creates a sink in the trial folder and remembers it, so that it
// is armed with the secrets, closed, and its truncation recorded.
func (r *run) openSink(rel string, lim capfile.Limit) (*sink, error) {
	s, err := newSink(filepath.Join(r.spec.Dir, filepath.FromSlash(rel)), lim)
	if err != nil {
		return nil, err
	}
	r.sinksMu.Lock()
	defer r.sinksMu.Unlock()
	if r.secrets != nil {
		s.scrubWith(r.secrets)
	}
	r.sinks = append(r.sinks, namedSink{rel, s})
	return s, nil
}

type namedSink struct {
	rel string
	*sink
}

// armSinks gives every open sink the trial's secrets, once they are all
// minted: the agents' and the user's keys in the forms they are shown in,
// and the gateway tokens.
func (r *run) armSinks(secrets []secret.Secret) {
	r.sinksMu.Lock()
	defer r.sinksMu.Unlock()
	r.secrets = secret.NewScrubber(secrets...)
	for _, s := range r.sinks {
		s.scrubWith(r.secrets)
	}
}

// closeSinks closes every sink but trial.log, which the trial writes to
// the end (closing twice does nothing), and records which files were cut.
func (r *run) closeSinks() {
	r.sinksMu.Lock()
	sinks := r.sinks
	r.sinksMu.Unlock()
	for _, s := range sinks {
		if s.sink == r.logFile {
			continue
		}
		if err := s.Close(); err != nil {
			r.cleanupError("write "+s.rel, err)
		}
		if n := s.file.Dropped(); n > 0 {
			if r.res.Truncated == nil {
				r.res.Truncated = map[string]int64{}
			}
			r.res.Truncated[s.rel] = n
		}
	}
}

// keyForms are the ways a secret key is commonly shown: hex in either case,
// and bech32 (nsec…).
func keyForms(sk string) []secret.Secret {
	forms := []secret.Secret{secret.New(sk), secret.New(strings.ToUpper(sk))}
	if nsec, err := nip19.EncodePrivateKey(sk); err == nil {
		forms = append(forms, secret.New(nsec))
	}
	return forms
}

// scrubTree rewrites every regular file under dir that holds one of the
// trial's secrets, with each replaced: what the verifier wrote and what the
// agents left as artifacts, copied out of the container. Links are not
// followed (CopyOut makes none).
func scrubTree(dir string, sc *secret.Scrubber) error {
	if sc.Empty() {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		return scrubFile(p, sc)
	})
}

// scrubFile streams a file through the scrubber into a temporary file,
// which replaces it when a secret was found.
func scrubFile(path string, sc *secret.Scrubber) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".scrub-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	w := sc.Writer(tmp)
	_, err = io.Copy(w, in)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("scrub %s: %w", path, err)
	}
	if w.Replaced() == 0 {
		return nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("scrub %s: %w", path, err)
	}
	return nil
}
