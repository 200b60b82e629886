package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/troupebench/troupe/internal/capfile"
)

// The trial files troupe writes are bounded: when one would grow too big,
// its head and tail are kept and its middle is dropped, with a marker in
// its place. The viewer shows the marker where it is, as a notice, and
// never takes it for a message, a call or a line of output.

// Cut is a marker where troupe dropped the middle of a file it wrote.
type Cut struct {
	DroppedBytes int64 `json:"dropped_bytes"`
	DroppedLines int64 `json:"dropped_lines"`
	HeadBytes    int64 `json:"head_bytes"`
	TailBytes    int64 `json:"tail_bytes"`
	// Raw is a text log's marker line as written, for its title; the
	// numbers above are then what could be read from it (-1: not said).
	Raw string `json:"-"`
}

// String is the notice shown in place of the dropped part.
func (c *Cut) String() string {
	switch {
	case c.DroppedBytes < 0:
		return strings.TrimSpace(c.Raw)
	case c.DroppedLines < 0:
		return fmt.Sprintf("%d bytes dropped here", c.DroppedBytes)
	case c.DroppedLines == 1:
		return fmt.Sprintf("%d bytes (1 line) dropped here", c.DroppedBytes)
	}
	return fmt.Sprintf("%d bytes (%d lines) dropped here", c.DroppedBytes, c.DroppedLines)
}

// jsonlCutKey starts the only key of a JSONL file's marker line
// (capfile.Marker).
const jsonlCutKey = `{"troupe_truncated":`

// jsonlCut reads a JSONL line as a marker; nil when it is none. No line
// troupe writes otherwise starts with that key — a transcript line starts
// with its seq, a call with its time, an audit line with its time — and
// every line is troupe's own encoding, so an agent cannot forge one.
func jsonlCut(line []byte) *Cut {
	line = bytes.TrimSpace(line)
	if !bytes.HasPrefix(line, []byte(jsonlCutKey)) {
		return nil
	}
	var m capfile.Marker
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	t := m.Truncated
	return &Cut{DroppedBytes: t.DroppedBytes, DroppedLines: t.DroppedLines, HeadBytes: t.HeadBytes, TailBytes: t.TailBytes}
}

// textCutPrefix starts a text log's marker line, which says in words how
// many bytes were dropped.
const textCutPrefix = capfile.TextMarkerPrefix

var (
	cutBytes = regexp.MustCompile(`(\d+) bytes?`)
	cutLines = regexp.MustCompile(`(\d+) lines?`)
)

// textCut reads a text log's line as a marker; nil when it is none.
func textCut(line string) *Cut {
	if !strings.HasPrefix(line, textCutPrefix) {
		return nil
	}
	c := &Cut{DroppedBytes: -1, DroppedLines: -1, Raw: strings.TrimRight(line, "\r\n")}
	if m := cutBytes.FindStringSubmatch(line); m != nil {
		c.DroppedBytes, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := cutLines.FindStringSubmatch(line); m != nil && c.DroppedBytes >= 0 {
		c.DroppedLines, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return c
}

// logPart is a run of a text log's lines, or a marker where lines were
// dropped.
type logPart struct {
	Text string
	Cut  *Cut
}

// splitCuts splits a text log at its markers.
func splitCuts(text string) []logPart {
	var parts []logPart
	var run strings.Builder
	flush := func() {
		if run.Len() > 0 {
			parts = append(parts, logPart{Text: run.String()})
			run.Reset()
		}
	}
	for line := range strings.SplitAfterSeq(text, "\n") {
		if c := textCut(line); c != nil {
			flush()
			parts = append(parts, logPart{Cut: c})
			continue
		}
		run.WriteString(line)
	}
	flush()
	return parts
}

// cutSummary says, for a log's folded heading, how much troupe dropped
// from it when writing it; "" when nothing.
func cutSummary(parts []logPart) string {
	var n, dropped int64
	for _, p := range parts {
		if p.Cut != nil {
			n++
			dropped += max(p.Cut.DroppedBytes, 0)
		}
	}
	switch {
	case n == 0:
		return ""
	case dropped == 0:
		return "cut when written"
	}
	return fmt.Sprintf("cut when written: %d bytes dropped", dropped)
}
