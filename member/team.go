package member

import (
	"fmt"
	"slices"
	"strings"
)

// Participant is one participant of a channel, from the relay's member
// list: an agent, or the trial user (ID and Role "user").
type Participant struct {
	Pubkey, ID, Role string
	// Kind is orchestrator, worker, or user.
	Kind string
}

// Team is a channel's member list, as the relay publishes it (kind 39002).
type Team struct {
	Members []Participant
}

// ByPubkey finds a participant; nil when the key is not a member.
func (t *Team) ByPubkey(pk string) *Participant {
	for i := range t.Members {
		if t.Members[i].Pubkey == pk {
			return &t.Members[i]
		}
	}
	return nil
}

// Describe lists the team as "id (role), …", for logs and for a model.
func (t *Team) Describe() string {
	var parts []string
	for _, m := range t.Members {
		parts = append(parts, fmt.Sprintf("%s (%s)", m.ID, m.Role))
	}
	return strings.Join(parts, ", ")
}

// Name is how a message's author is shown: "id (role)", or the start of
// an unknown key.
func (t *Team) Name(pk string) string {
	if m := t.ByPubkey(pk); m != nil {
		return fmt.Sprintf("%s (%s)", m.ID, m.Role)
	}
	return pk[:min(12, len(pk))]
}

// ResolveMentions turns teammate ids, roles or "user" into pubkeys. An
// unknown name is an error for the model to fix, never a silent miss.
func (t *Team) ResolveMentions(names []string) ([]string, error) {
	var out []string
	var unknown []string
	add := func(pk string) {
		if !slices.Contains(out, pk) {
			out = append(out, pk)
		}
	}
	for _, raw := range names {
		name := strings.TrimPrefix(strings.TrimSpace(raw), "@")
		found := false
		for _, m := range t.Members {
			if strings.EqualFold(m.ID, name) {
				add(m.Pubkey)
				found = true
			}
		}
		if !found {
			for _, m := range t.Members {
				if m.Role != "" && strings.EqualFold(m.Role, name) && m.ID != "user" {
					add(m.Pubkey)
					found = true
				}
			}
		}
		if !found && len(name) == 64 && t.ByPubkey(name) != nil {
			add(name)
			found = true
		}
		if !found {
			unknown = append(unknown, raw)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown teammate %s; mention ids or roles of the team: %s", strings.Join(unknown, ", "), t.Describe())
	}
	return out, nil
}
