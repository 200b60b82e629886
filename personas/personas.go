// Package personas holds troupe's built-in persona prompts and composes an
// agent's system prompt from a persona, the agent's identity and its team.
//
// A manifest pins a built-in persona as "troupe:<name>" with its SHA-256, so
// a change to a persona in a new troupe version is caught by the pin rather
// than silently changing an experiment. Composition is deterministic: the
// same inputs give the same bytes.
package personas

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed library/*.md
var library embed.FS

// ErrUnknown is returned for a name that is not a built-in persona.
var ErrUnknown = errors.New("unknown persona")

// Persona is one built-in persona prompt.
type Persona struct {
	Name string
	// Summary is the text of the persona's first heading.
	Summary string
	Text    []byte
	// SHA256 is the digest a manifest pins it with.
	SHA256 string
}

// FS serves the library as <name>.md files at its root; it is what a
// manifest's "troupe:" paths resolve in.
func FS() fs.FS {
	sub, err := fs.Sub(library, "library")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// List returns every built-in persona, sorted by name.
func List() []Persona {
	entries, err := fs.ReadDir(FS(), ".")
	if err != nil {
		panic(err)
	}
	var out []Persona
	for _, e := range entries {
		p, err := Get(strings.TrimSuffix(e.Name(), ".md"))
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Persona) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get returns the built-in persona called name.
func Get(name string) (Persona, error) {
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return Persona{}, fmt.Errorf("%w %q", ErrUnknown, name)
	}
	text, err := fs.ReadFile(FS(), path.Join(".", name+".md"))
	if err != nil {
		return Persona{}, fmt.Errorf("%w %q; the built-in personas are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	sum := sha256.Sum256(text)
	summary, _, _ := bytes.Cut(text, []byte("\n"))
	return Persona{
		Name:    name,
		Summary: strings.TrimSpace(strings.TrimPrefix(string(summary), "#")),
		Text:    text,
		SHA256:  hex.EncodeToString(sum[:]),
	}, nil
}

// Names lists the built-in personas' names, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(FS(), ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".md"))
	}
	return names
}

// Member is one participant of a trial as the prompt shows it.
type Member struct {
	ID string
	// Role is the manifest's role (lead, implementer, ...); Kind is
	// orchestrator or worker (or user for the trial user).
	Role, Kind string
	Pubkey     string
}

// Context is what an agent is told about itself and its trial.
type Context struct {
	Self    Member
	Channel string
	// User is the trial user who posts the task.
	User Member
	// Team is every agent of the trial in trial order; Self is left out of
	// the table.
	Team []Member
}

// Compose returns the agent's system prompt: the persona text, then a
// "## Your identity" section, then "## Your team" with a table of every
// teammate (id, role, kind, pubkey) or, for a lone agent, a note that it
// works alone.
func Compose(persona []byte, c Context) []byte {
	var b bytes.Buffer
	b.Write(persona)
	if len(persona) > 0 && !bytes.HasSuffix(persona, []byte("\n")) {
		b.WriteByte('\n')
	}
	if len(persona) > 0 {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "## Your identity\n\n")
	fmt.Fprintf(&b, "You are `%s`, role %s, kind %s.\n", c.Self.ID, cell(c.Self.Role), cell(c.Self.Kind))
	fmt.Fprintf(&b, "Your pubkey is `%s`.\n", c.Self.Pubkey)
	fmt.Fprintf(&b, "The team coordinates in channel `%s`.\n", c.Channel)
	fmt.Fprintf(&b, "Tasks come from the trial user `%s` (pubkey `%s`); address your final report to them.\n", c.User.ID, c.User.Pubkey)
	switch orch, ok := orchestrator(c); {
	case ok && orch == c.Self.ID:
		b.WriteString("You are the orchestrator: only you end the trial, with a channel message that starts with `DONE:`.\n")
	case ok:
		fmt.Fprintf(&b, "Only the orchestrator, `%s`, ends the trial, with a channel message that starts with `DONE:`.\n", orch)
	}
	b.WriteString("\n## Your team\n\n")
	var mates []Member
	for _, m := range c.Team {
		if m.ID != c.Self.ID {
			mates = append(mates, m)
		}
	}
	if len(mates) == 0 {
		b.WriteString("You have no teammates on this trial — you are working alone. Do the work yourself; there is nobody to delegate to.\n")
		return b.Bytes()
	}
	b.WriteString("| id | role | kind | pubkey |\n|----|------|------|--------|\n")
	for _, m := range mates {
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", cell(m.ID), cell(m.Role), cell(m.Kind), m.Pubkey)
	}
	return b.Bytes()
}

func orchestrator(c Context) (string, bool) {
	for _, m := range append([]Member{c.Self}, c.Team...) {
		if m.Kind == "orchestrator" {
			return m.ID, true
		}
	}
	return "", false
}

// cell keeps a value on one line of a Markdown table.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
