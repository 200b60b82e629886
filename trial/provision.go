package trial

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nbd-wtf/go-nostr"
	"github.com/troupebench/troupe/internal/atomicfile"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/personas"
	"github.com/troupebench/troupe/relay"
	"github.com/troupebench/troupe/trialdir"
)

// Step 1 (docs/run.md), provision: the trial's identities, prompts, files,
// channel and gateway tokens.

// provision makes the trial's identities, prompts, channel and tokens.
func (r *run) provision() error {
	user, members, minted, err := r.identities()
	if err != nil {
		return err
	}
	for i, ar := range r.agents {
		ar.prompt = personas.Compose(ar.Prompt, personas.Context{Self: members[i], Channel: r.id, User: user, Team: members})
		if err := r.agentFiles(ar); err != nil {
			return err
		}
	}
	if err := r.relayFiles(append([]personas.Member{user}, members...)); err != nil {
		return err
	}
	// Values the task took from the host are as secret as what troupe
	// minted.
	for _, v := range r.spec.Task.FromHost {
		minted = append(minted, v)
	}
	if minted, err = r.mintTokens(minted); err != nil {
		return err
	}
	// Every secret is minted: from now on no file of the trial and no
	// message of the channel may hold one.
	r.armSinks(minted)
	if err := r.openChannel(); err != nil {
		return err
	}
	for _, ar := range r.agents {
		r.res.Agents = append(r.res.Agents, trialdir.AgentRecord{ID: ar.ID, ClassID: ar.ClassID, Kind: string(ar.Kind), Role: ar.Role, Endpoint: ar.Endpoint, Pubkey: ar.pk, UID: ar.uid,
			Stack: ar.stack.Name, StackDigest: ar.stack.Digest()})
	}
	return nil
}

// identities makes a key for the trial user and for each agent (with its
// stack and, isolated, its uid): the team as the prompts name it, and
// every minted key in each of its forms.
func (r *run) identities() (user personas.Member, members []personas.Member, minted []secret.Secret, err error) {
	sk := nostr.GeneratePrivateKey()
	r.userSK = secret.New(sk)
	r.userPK, _ = nostr.GetPublicKey(sk)
	minted = keyForms(sk)
	for i, a := range r.spec.Team.Agents {
		st, err := r.spec.Stacks.Resolve(string(a.Harness))
		if err != nil {
			return user, nil, nil, fmt.Errorf("agent %s: %w", a.ID, err)
		}
		sk := nostr.GeneratePrivateKey()
		ar := &agentRun{Agent: a, stack: st, sk: secret.New(sk)}
		ar.pk, _ = nostr.GetPublicKey(sk)
		minted = append(minted, keyForms(sk)...)
		if r.isolated() {
			ar.uid, ar.gid = agentUIDBase+i+1, agentGID
		}
		r.agents = append(r.agents, ar)
		members = append(members, personas.Member{ID: a.ID, Role: a.Role, Kind: string(a.Kind), Pubkey: ar.pk})
	}
	user = personas.Member{ID: "user", Role: "user", Kind: "user", Pubkey: r.userPK}
	return user, members, minted, nil
}

// agentFiles writes an agent's system prompt to its folder and opens the
// files its output, calls and conversation go to.
func (r *run) agentFiles(ar *agentRun) error {
	bounds := r.env.bounds()
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.Agent(ar.ID))), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.SystemPrompt(ar.ID))), ar.prompt, 0o644); err != nil {
		return err
	}
	var err error
	if ar.stdout, err = r.openSink(trialdir.Stdout(ar.ID), bounds.AgentOutput); err != nil {
		return err
	}
	if ar.stderr, err = r.openSink(trialdir.Stderr(ar.ID), bounds.AgentOutput); err != nil {
		return err
	}
	if r.env.Record != RecordNone {
		if ar.calls, err = r.openSink(trialdir.Calls(ar.ID), bounds.Calls); err != nil {
			return err
		}
	}
	if r.env.Record.full() {
		if ar.conversation, err = r.openSink(trialdir.ConversationPlain(ar.ID), bounds.Conversation); err != nil {
			return err
		}
	}
	return nil
}

// relayFiles opens the channel's transcript and audit and writes who
// holds which key, public from the start, so that troupe view can name
// the speakers of a trial that has no result.json yet.
func (r *run) relayFiles(team []personas.Member) error {
	bounds := r.env.bounds()
	if err := os.MkdirAll(filepath.Join(r.spec.Dir, trialdir.Relay), 0o755); err != nil {
		return err
	}
	var err error
	if r.transcript, err = r.openSink(trialdir.Transcript, bounds.Transcript); err != nil {
		return err
	}
	if r.audit, err = r.openSink(trialdir.Audit, bounds.Audit); err != nil {
		return err
	}
	var roster []trialdir.Member
	for _, m := range team {
		roster = append(roster, trialdir.Member(m))
	}
	var buf bytes.Buffer
	if err := trialdir.WriteMembers(&buf, roster); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.spec.Dir, filepath.FromSlash(trialdir.Members)), buf.Bytes())
}

// mintTokens opens the trial on the gateway, which mints a token per
// agent: the secrets it is given are scrubbed from what it records, and
// the tokens are added to them.
func (r *run) mintTokens(minted []secret.Secret) ([]secret.Secret, error) {
	var specs []llm.AgentSpec
	for _, ar := range r.agents {
		specs = append(specs, llm.AgentSpec{ID: ar.ID, Role: ar.Role, Kind: string(ar.Kind), Pubkey: ar.pk, Endpoint: ar.Endpoint, Budget: ar.Budget, Log: optional(ar.calls), Conversation: optional(ar.conversation)})
	}
	m := r.spec.Team.Manifest
	gspec := llm.TrialSpec{ID: r.id, Name: r.spec.Name, Channel: r.id, UserPubkey: r.userPK, Agents: specs, Prices: m.Prices, MaxCostUSD: m.TrialBudget.MaxCostUSD,
		Lead: r.agents[0].ID, Secrets: slices.Clone(minted)}
	if rp := r.spec.Replay; rp != nil {
		pubkeys := map[string]string{"user": r.userPK}
		for _, ar := range r.agents {
			pubkeys[ar.ID] = ar.pk
		}
		gspec.Replay = rp.gateway(r.id, pubkeys)
	}
	var err error
	if r.gw, err = r.env.Gateway.OpenTrial(gspec); err != nil {
		return nil, fmt.Errorf("mint gateway tokens: %w", err)
	}
	for _, ar := range r.agents {
		token := r.gw.Token(ar.ID)
		minted = append(minted, token, secret.New(strings.ToUpper(token.Reveal())))
	}
	return minted, nil
}

// openChannel opens the trial's channel on the relay, its members the
// agents.
func (r *run) openChannel() error {
	var members []relay.Member
	for _, ar := range r.agents {
		members = append(members, relay.Member{Pubkey: ar.pk, ID: ar.ID, Role: ar.Role, Kind: string(ar.Kind)})
	}
	m := r.spec.Team.Manifest
	var err error
	r.ch, err = r.env.Relay.OpenChannel(relay.ChannelConfig{
		ID: r.id, Name: r.spec.Name, About: fmt.Sprintf("job=%s task=%s condition=%s manifest=%s", r.env.JobID, r.spec.Task.Name, m.Condition, m.Hash()),
		Members: members, UserPubkey: r.userPK, UserSecretKey: r.userSK, Orchestrator: r.agents[0].pk,
		Transcript: r.transcript, Audit: r.audit, Secrets: r.secrets,
		// The DONE: freezes the model calls before the orchestrator hears
		// it was accepted: no turn starts after it, and the turns in
		// progress end (the lead's own, with the call after its DONE:), so
		// what the trial used does not depend on the timing.
		OnDone: func() { r.gw.FreezeAfterTurns(string(DeclaredDone)) },
	})
	if err != nil {
		return fmt.Errorf("open the trial channel: %w", err)
	}
	return nil
}
