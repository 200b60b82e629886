package docker

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var baseImageCases = []struct {
	name       string
	dockerfile string
	want       []string
	notStatic  bool // an error, errNotStatic
}{
	{"empty", "", nil, false},
	{"one", "FROM debian:bookworm\nRUN true\n", []string{"debian:bookworm"}, false},
	{"digest", "FROM debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", []string{"debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, false},
	{"platform", "FROM --platform=linux/amd64 debian:12 AS build\nFROM --platform=$BUILDPLATFORM alpine:3", []string{"debian:12", "alpine:3"}, false},
	{"lower-case keywords", "from debian:12 as build\nrun true\nfrom build\nFrom alpine:3 As Final\n", []string{"debian:12", "alpine:3"}, false},
	{"stages", "FROM golang:1.26 AS Build\nRUN go build\nFROM alpine:3\nCOPY --from=build /x /x\nFROM BUILD AS again\nFROM again\n", []string{"golang:1.26", "alpine:3"}, false},
	{"a stage named later is an image", "FROM later\nFROM debian AS later\nFROM later\n", []string{"later", "debian"}, false},
	{"once each", "FROM debian AS a\nFROM debian AS b\nFROM debian\n", []string{"debian"}, false},
	{"scratch", "FROM scratch\nCOPY x /x\nFROM Scratch AS s\n", nil, false},
	{"arg default", "ARG BASE=debian:12\nFROM ${BASE}\nFROM $BASE AS again\n", []string{"debian:12"}, false},
	{"arg built from args", "ARG REG=docker.io/library\nARG TAG=12\nARG IMG=${REG}/debian\nFROM $IMG:$TAG\n", []string{"docker.io/library/debian:12"}, false},
	{"arg quoted, several on a line", "ARG A=\"debian\" B='12'\nFROM $A:${B}\n", []string{"debian:12"}, false},
	{"arg redefined", "ARG BASE=alpine\nARG BASE=debian\nFROM $BASE\n", []string{"debian"}, false},
	{"default word", "ARG X=\nARG Y=alpine\nFROM ${X:-debian}:12\nFROM ${Y:-debian}\nFROM ${X-busybox}x\n", []string{"debian:12", "alpine", "x"}, false},
	{"alternative word", "ARG X=\nARG Y=1\nFROM debian${X:+:nope}\nFROM alpine${Y:+:3}\nFROM busybox${X+:set}\n", []string{"debian", "alpine:3", "busybox:set"}, false},
	{"nested expansion", "ARG X=\nARG Y=debian\nFROM ${X:-${Y}}:12\n", []string{"debian:12"}, false},
	{"continuation lines", "FROM \\\n  --platform=linux/amd64 \\\n  debian:12 \\\n  AS build\nRUN a \\\n  && b\n", []string{"debian:12"}, false},
	{"continuation broken by comments and blank lines", "FROM \\\n# a comment inside\n\n  debian:12 \\  \n  AS build\n", []string{"debian:12"}, false},
	{"comments", "# FROM not-me\n   # FROM nor-me\nFROM debian:12\n# FROM nor-me-either \\\nRUN true\n", []string{"debian:12"}, false},
	{"escape directive", "# escape=`\nFROM `\n  debian:12\nRUN dir c:\\\n", []string{"debian:12"}, false},
	{"a directive after a comment is a comment", "# hello\n# escape=`\nFROM \\\n debian:12\n", []string{"debian:12"}, false},
	{"crlf and bom", "\ufeffFROM debian:12\r\nFROM alpine:3 \\\r\n  AS x\r\n", []string{"debian:12", "alpine:3"}, false},
	{"arg without default", "ARG BASE\nFROM ${BASE}\n", nil, true},
	{"arg without default, in a default", "ARG V\nARG BASE=debian:$V\nFROM $BASE\n", nil, true},
	{"undeclared", "FROM debian:$VERSION\n", nil, true},
	{"a stage's arg is not global", "FROM debian\nARG X=alpine\nFROM $X\n", []string{"debian"}, true},
	{"unresolvable with others", "ARG V\nFROM debian:12\nFROM img:$V\nFROM alpine:3\n", []string{"debian:12", "alpine:3"}, true},
	{"unfollowed expansion", "ARG X=debian:12\nFROM ${X%%:*}\n", nil, true},
	{"unclosed", "ARG X=debian\nFROM ${X\n", nil, true},
	{"no image", "FROM\nFROM --platform=linux/amd64\n", nil, true},
}

func TestBaseImages(t *testing.T) {
	for _, tc := range baseImageCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := baseImages([]byte(tc.dockerfile))
			var refs []string
			for _, b := range got {
				refs = append(refs, b.Ref)
			}
			if !slices.Equal(refs, tc.want) {
				t.Errorf("bases %q, want %q", refs, tc.want)
			}
			if tc.notStatic != (err != nil) || err != nil && !errors.Is(err, errNotStatic) {
				t.Errorf("error %v, want one: %v", err, tc.notStatic)
			}
			if err != nil && !strings.Contains(err.Error(), "line ") {
				t.Errorf("the error %q does not say where", err)
			}
		})
	}
	got, _ := baseImages([]byte("# syntax=docker/dockerfile:1\n\nARG A=x\n\nFROM \\\n\n  debian\nFROM alpine\n"))
	if len(got) != 2 || got[0].Line != 5 || got[1].Line != 8 {
		t.Errorf("the FROMs' lines: %+v, want 5 and 8", got)
	}
}

func FuzzBaseImages(f *testing.F) {
	for _, tc := range baseImageCases {
		f.Add([]byte(tc.dockerfile))
	}
	f.Fuzz(func(t *testing.T, dockerfile []byte) {
		got, err := baseImages(dockerfile)
		if err != nil && !errors.Is(err, errNotStatic) {
			t.Errorf("an error that is not errNotStatic: %v", err)
		}
		lines := strings.Count(string(dockerfile), "\n") + 1
		seen := map[string]bool{}
		for _, b := range got {
			if b.Ref == "" || strings.EqualFold(b.Ref, "scratch") || seen[b.Ref] || b.Line < 1 || b.Line > lines {
				t.Errorf("base %+v of %d lines (seen before: %v)", b, lines, seen[b.Ref])
			}
			seen[b.Ref] = true
		}
		again, err2 := baseImages(dockerfile)
		if !slices.Equal(got, again) || (err == nil) != (err2 == nil) {
			t.Errorf("two readings differ: %v %v, %v %v", got, err, again, err2)
		}
	})
}
