// Package childlog is a hosted agent's standard error as the host keeps
// it: every line in the host's log, and the last ones as the agent's last
// words when it fails. troupe acp and troupe cli both host agents.
package childlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"

	"github.com/troupebench/troupe/internal/clip"
)

// Lines logs a child's standard error, one log line per line it writes,
// and keeps the last ones for the message that reports its end. It is an
// io.Writer for exec.Cmd.Stderr; New makes one.
type Lines struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	last    []string
}

// Kept is how many of the child's last stderr lines are quoted.
const Kept = 20

// New logs each line to log as "child stderr".
func New(log *slog.Logger) *Lines { return &Lines{log: log} }

func (s *Lines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > 64<<10 { // a line without end: log what there is
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
	return len(p), nil
}

// line runs under mu.
func (s *Lines) line(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.TrimSpace(l) == "" {
		return
	}
	l = clip.Head(l, 2000)
	s.log.Info("child stderr", "line", l)
	s.last = append(s.last, l)
	if len(s.last) > Kept {
		s.last = s.last[len(s.last)-Kept:]
	}
}

// Last is the child's last stderr lines, the unfinished one included.
func (s *Lines) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := s.last
	if len(bytes.TrimSpace(s.partial)) > 0 {
		lines = append(lines[:len(lines):len(lines)], clip.Head(string(s.partial), 2000))
	}
	return strings.Join(lines, "\n")
}
