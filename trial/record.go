package trial

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/troupebench/troupe/trialdir"
)

// RecordMode is how much of each model call a trial keeps (--record).
type RecordMode string

// The record modes.
const (
	// RecordFull keeps every call whole, request and answer, in each
	// agent's llm-conversation.jsonl.gz, beside the metering lines. The
	// zero value means it.
	RecordFull RecordMode = "full"
	// RecordMeta keeps the metering lines only (llm-calls.jsonl).
	RecordMeta RecordMode = "meta"
	// RecordNone keeps no per-call file.
	RecordNone RecordMode = "none"
)

// ParseRecordMode reads --record.
func ParseRecordMode(s string) (RecordMode, error) {
	switch m := RecordMode(s); m {
	case "", RecordFull:
		return RecordFull, nil
	case RecordMeta, RecordNone:
		return m, nil
	}
	return "", fmt.Errorf("record mode %q is not full (every call whole), meta (metering lines only) or none", s)
}

func (m RecordMode) full() bool { return m == "" || m == RecordFull }

// optional is a sink as an io.Writer, nil when there is none (a typed nil
// pointer would not be a nil io.Writer).
func optional(s *sink) io.Writer {
	if s == nil {
		return nil
	}
	return s
}

// compressConversations gzips each agent's conversation record once its
// sink is closed: conversations compress well, and a viewer reads them
// whole anyway.
func (r *run) compressConversations() {
	for _, ar := range r.agents {
		if ar.conversation == nil {
			continue
		}
		plain := filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.ConversationPlain(ar.ID)))
		if err := gzipFile(plain); err != nil {
			r.cleanupError("compress "+plain, err)
		}
	}
}

// gzipFile replaces path with path.gz (trialdir.Conversation is
// trialdir.ConversationPlain and .gz).
func gzipFile(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(path + ".gz")
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path + ".gz")
		return err
	}
	return os.Remove(path)
}
