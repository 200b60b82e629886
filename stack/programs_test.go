package stack

import (
	"encoding/binary"
	"io/fs"
	"strings"
	"testing"

	"github.com/troupebench/troupe/runtime"
)

// CheckPrograms checks the agent a bridge hosts as it checks a command: a
// typo in the program after `troupe acp --` is refused when its folder is
// uploaded, and what the host cannot check is said.
func TestCheckPrograms(t *testing.T) {
	arm := make([]byte, 64)
	copy(arm, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(arm[16:], 2)
	binary.LittleEndian.PutUint16(arm[18:], 183) // AArch64
	binary.LittleEndian.PutUint32(arm[20:], 1)
	binary.LittleEndian.PutUint16(arm[52:], 64)
	goose := []runtime.File{{Path: "/opt/goose", Mode: fs.ModeDir | 0o755}, {Path: "/opt/goose/bin/goose", Mode: 0o755, Data: []byte("#!/bin/sh\n")}}
	plain := []runtime.File{{Path: "/opt/a/agent", Mode: 0o644, Data: []byte("x")}}
	troupe := runtime.BinaryPath
	for _, tc := range []struct {
		name    string
		command []string
		files   []runtime.File
		install bool
		err     string
		notes   []string // each note's start, "ok " for a checked one
	}{
		{"acp hosted uploaded", []string{troupe, "acp", "--", "/opt/goose/bin/goose", "acp"}, goose, false, "",
			[]string{"ok command: troupe's own binary", "ok the agent troupe acp hosts: /opt/goose/bin/goose is uploaded"}},
		{"acp hosted typo", []string{troupe, "acp", "--", "/opt/goose/bin/goosee", "acp"}, goose, false,
			"the agent troupe acp hosts /opt/goose/bin/goosee is not in the upload, though its folder is", nil},
		{"cli hosted without x bit", []string{troupe, "cli", "--resume=-c", "--", "/opt/a/agent", "{resume}", "{prompt}"}, plain, false,
			"the agent troupe cli hosts /opt/a/agent is uploaded without an execute bit", nil},
		{"cli without --", []string{troupe, "cli", "/opt/a/agent"}, nil, false, "troupe cli needs the agent to host after --", nil},
		{"cli hosted on PATH", []string{troupe, "cli", "--", "claude", "-p", "{prompt}"}, nil, false, "",
			[]string{"ok command", "the agent troupe cli hosts: claude is looked up in the agent's PATH"}},
		{"cli hosted installed", []string{troupe, "cli", "--", "/usr/local/bin/codex", "exec", "{prompt}"}, nil, true, "",
			[]string{"ok command", "the agent troupe cli hosts: /usr/local/bin/codex is not uploaded: the install script must put it there"}},
		{"cli hosted relative", []string{troupe, "cli", "--", "./agent"}, nil, false, "",
			[]string{"ok command", "the agent troupe cli hosts: ./agent is relative: it is resolved against the task's working folder"}},
		{"foreign ELF", []string{"/opt/a/agent"}, []runtime.File{{Path: "/opt/a/agent", Mode: 0o755, Data: arm}}, false,
			"/opt/a/agent is an ELF program for AARCH64", nil},
		{"the reference agent", []string{troupe, "agent"}, nil, false, "", []string{"ok command: troupe's own binary"}},
	} {
		st := &Stack{Name: "s", Command: tc.command}
		if tc.install {
			st.Install = &File{}
		}
		notes, err := st.CheckPrograms(tc.files)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(notes) != len(tc.notes) {
			t.Errorf("%s: notes %+v, want %q", tc.name, notes, tc.notes)
			continue
		}
		for i, want := range tc.notes {
			got := notes[i].Text
			if notes[i].Checked {
				got = "ok " + got
			}
			if !strings.HasPrefix(got, want) {
				t.Errorf("%s: note %q, want %q…", tc.name, got, want)
			}
		}
	}
}

// Unchecked says from the definition alone what a dry run cannot check.
func TestUnchecked(t *testing.T) {
	troupe := runtime.BinaryPath
	for _, tc := range []struct {
		st   Stack
		want []string
	}{
		{Stack{Command: []string{troupe, "agent"}}, nil},
		{Stack{Command: []string{troupe, "cli", "--", "claude", "-p", "{prompt}"}}, []string{"the agent troupe cli hosts: claude is looked up in the agent's PATH"}},
		{Stack{Command: []string{troupe, "acp", "--", "/opt/goose/bin/goose"}, Files: []File{{To: "/opt/goose"}}}, nil},
		{Stack{Command: []string{"/usr/bin/agent"}, Install: &File{}}, []string{"command: /usr/bin/agent is not uploaded: the install script must put it there"}},
	} {
		got := tc.st.Unchecked()
		if len(got) != len(tc.want) {
			t.Errorf("%q: %q, want %q", tc.st.Command, got, tc.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%q: %q, want %q…", tc.st.Command, got[i], tc.want[i])
			}
		}
	}
}
