package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/internal/secret"
	"github.com/troupebench/troupe/relay"
)

type relayOptions struct {
	addr         string
	channel      string
	members      []string
	orchestrator string
	authURLs     []string
	transcript   string
	task         string
	keysDir      string
}

func newRelayCmd(a *app) *cobra.Command {
	var opts relayOptions
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Serve troupe's Nostr relay on its own, for development and other clients",
		Long: `Serve the relay troupe embeds in every job: NIP-01 with NIP-42 AUTH required and
member-only trial channels (kind 9 messages with an h tag). Use it to develop an agent
or to look at a channel with another Nostr client.

With --channel and one or more --member keys (hex or npub) a channel is opened; the
first member is its orchestrator unless --orchestrator says otherwise. A member given
as ID[:ROLE[:KIND]]=KEY is published with that id, team role and kind in the channel's
member list, so agents can mention it by id or role; given as ID[:ROLE[:KIND]] alone, it
gets a new key whose secret is written to --keys-dir as ID.key. A trial user key is
generated for the channel. Clients authenticate under the listen URL or any
--auth-url. The relay runs until interrupted (Ctrl+C), then closes cleanly, syncing
the transcript.

With --task the relay plays the trial user too: it posts the task to the orchestrator
once every member has authenticated and subscribed (run your agents meanwhile), and
prints the orchestrator's DONE: when it comes. docs/stacks.md walks through a team.`,
		Example: `  troupe relay --channel dev --member npub1... --member 3bf0c63f...
  troupe relay --channel dev --member lead-1:lead=$LEAD_PK --member worker-1:implementer=$WORKER_PK
  troupe relay --channel dev --keys-dir keys --member lead-1:lead --member worker-1:implementer --task "..."
  troupe relay --addr 127.0.0.1:7447 --channel dev --member $LEAD --transcript -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRelay(cmd.Context(), a.stdout, a.raw.stdout, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.addr, "addr", "127.0.0.1:7447", "address to listen on")
	f.StringVar(&opts.channel, "channel", "", "open a channel with this id")
	f.StringArrayVar(&opts.members, "member", nil, "a channel member: KEY (hex or npub), ID[:ROLE[:KIND]]=KEY, or ID[:ROLE[:KIND]] with --keys-dir (repeat for each)")
	f.StringVar(&opts.orchestrator, "orchestrator", "", "the member whose DONE: ends the trial (default: the first member)")
	f.StringArrayVar(&opts.authURLs, "auth-url", []string{relay.ContainerURL}, "another URL clients may authenticate under (repeat for each)")
	f.StringVar(&opts.keysDir, "keys-dir", "", "generate a key for each --member given without one, and write its secret key to DIR/ID.key")
	f.StringVar(&opts.task, "task", "", "once every member is ready, post this as the trial user to the orchestrator, and print its DONE:")
	f.StringVar(&opts.transcript, "transcript", "", `write the channel's transcript (JSON lines) to this file; "-" is standard output`)
	return cmd
}

// runRelay runs the relay until ctx ends. What it says goes to out, escaped
// (a DONE: is an agent's text); a transcript on standard output goes to
// raw, as the JSON lines it is.
func runRelay(ctx context.Context, out, raw io.Writer, opts relayOptions) (err error) {
	if opts.channel == "" && len(opts.members) > 0 {
		return &usageError{command: "troupe relay", err: errors.New("--member needs --channel")}
	}
	if opts.channel != "" && len(opts.members) == 0 {
		return &usageError{command: "troupe relay", err: errors.New("--channel needs at least one --member")}
	}
	members, orchestrator, err := relayMembers(opts)
	if err != nil {
		return err
	}

	// The transcript is opened first so that it is closed last, after the
	// relay has synced it.
	var transcript io.Writer
	switch opts.transcript {
	case "":
	case "-":
		transcript = raw
	default:
		f, err := os.OpenFile(opts.transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("transcript: %w", err)
		}
		defer f.Close()
		transcript = f
	}

	r := relay.New()
	r.Addr = opts.addr
	r.AuthURLs = opts.authURLs
	if err := r.Open(ctx); err != nil {
		return err
	}
	defer func() {
		// The run ends on a signal, so closing needs a context of its own.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := r.Close(closeCtx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close relay: %w", cerr))
		}
	}()
	fmt.Fprintf(out, "relay listening on %s (relay pubkey %s)\n", r.URL(), r.PublicKey())
	fmt.Fprintf(out, "AUTH accepted under %s\n", strings.Join(append([]string{r.URL()}, opts.authURLs...), ", "))

	if opts.channel != "" {
		userSK := nostr.GeneratePrivateKey()
		userPK, _ := nostr.GetPublicKey(userSK)
		ch, err := r.OpenChannel(relay.ChannelConfig{
			ID: opts.channel, Name: opts.channel, Members: members, Orchestrator: orchestrator,
			UserPubkey: userPK, UserSecretKey: secret.New(userSK), Transcript: transcript,
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "channel %s open: %d members, orchestrator %s, trial user %s\n", opts.channel, len(members), orchestrator, userPK)
		if opts.task != "" {
			postTask(ctx, out, ch, opts.task, orchestrator)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping relay")
	return nil
}

// relayMembers reads --member and --orchestrator: the channel's members,
// each with its kind, and the orchestrator's pubkey (the first member's
// unless --orchestrator names another). A member given without a key gets
// one, its secret written to --keys-dir.
func relayMembers(opts relayOptions) (members []relay.Member, orchestrator string, err error) {
	members = make([]relay.Member, len(opts.members))
	for i, m := range opts.members {
		var sk string
		if members[i], sk, err = parseMember(m, i); err != nil {
			return nil, "", &usageError{command: "troupe relay", err: fmt.Errorf("--member %s: %w", m, err)}
		}
		if sk != "" {
			if opts.keysDir == "" {
				return nil, "", &usageError{command: "troupe relay", err: fmt.Errorf("--member %s has no key: give ID=KEY (a key is 64 hex digits or an npub), or --keys-dir to generate one", m)}
			}
			if err := writeKey(opts.keysDir, members[i].ID, sk); err != nil {
				return nil, "", err
			}
		}
	}
	if len(members) > 0 {
		orchestrator = members[0].Pubkey
	}
	if opts.orchestrator != "" {
		if orchestrator, err = parsePubkey(opts.orchestrator); err != nil {
			return nil, "", &usageError{command: "troupe relay", err: fmt.Errorf("--orchestrator: %w", err)}
		}
	}
	for i := range members {
		if members[i].Kind == "" {
			members[i].Kind = map[bool]string{true: "orchestrator", false: "worker"}[members[i].Pubkey == orchestrator]
		}
	}
	return members, orchestrator, nil
}

// postTask plays the trial user: once every member is ready it posts the
// task to the orchestrator, then reports the orchestrator's DONE:.
func postTask(ctx context.Context, out io.Writer, ch *relay.Channel, task, orchestrator string) {
	fmt.Fprintln(out, "waiting for every member to authenticate and subscribe")
	if ch.WaitReady(ctx) != nil {
		return
	}
	ev, err := ch.Post(ctx, task, orchestrator)
	if err != nil {
		fmt.Fprintf(out, "could not post the task: %v\n", err)
		return
	}
	fmt.Fprintf(out, "task posted (event %s); waiting for the orchestrator's DONE:\n", ev.ID)
	select {
	case <-ch.Done():
		fmt.Fprintf(out, "orchestrator: %s\n", ch.DoneEvent().Content)
	case <-ctx.Done():
	}
}

// parseMember reads a --member value: KEY, ID[:ROLE[:KIND]]=KEY, or
// ID[:ROLE[:KIND]] alone, whose key is then generated (secret == true says
// the caller must keep its secret key).
func parseMember(s string, i int) (m relay.Member, sk string, err error) {
	m = relay.Member{ID: fmt.Sprintf("member-%d", i+1)}
	name, key, hasKey := strings.Cut(s, "=")
	if !hasKey {
		if pk, err := parsePubkey(s); err == nil {
			m.Pubkey = pk
			return m, "", nil
		}
		name = s
	}
	parts := strings.Split(name, ":")
	if len(parts) > 3 || parts[0] == "" {
		return m, "", errors.New("give a key, ID[:ROLE[:KIND]]=KEY, or ID[:ROLE[:KIND]] with --keys-dir")
	}
	m.ID = parts[0]
	if len(parts) > 1 {
		m.Role = parts[1]
	}
	if len(parts) > 2 {
		if parts[2] != "orchestrator" && parts[2] != "worker" {
			return m, "", fmt.Errorf("kind %q is neither orchestrator nor worker", parts[2])
		}
		m.Kind = parts[2]
	}
	if !hasKey {
		sk = nostr.GeneratePrivateKey()
		m.Pubkey, _ = nostr.GetPublicKey(sk)
		return m, sk, nil
	}
	m.Pubkey, err = parsePubkey(key)
	return m, "", err
}

// writeKey writes a generated member's secret key to DIR/ID.key, readable by
// the user alone, as an agent's TROUPE_PRIVATE_KEY_FILE.
func writeKey(dir, id, sk string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--keys-dir: %w", err)
	}
	path := filepath.Join(dir, id+".key")
	if err := os.WriteFile(path, []byte(sk+"\n"), 0o600); err != nil {
		return fmt.Errorf("--keys-dir: write the key of %s: %w", id, err)
	}
	return nil
}

// parsePubkey reads a public key given as 64 hex digits or as an npub.
func parsePubkey(s string) (string, error) {
	if strings.HasPrefix(s, "npub1") {
		prefix, v, err := nip19.Decode(s)
		if err != nil || prefix != "npub" {
			return "", fmt.Errorf("not a valid npub: %v", err)
		}
		return v.(string), nil
	}
	if len(s) != 64 || strings.Trim(strings.ToLower(s), "0123456789abcdef") != "" {
		return "", errors.New("a public key is 64 hex digits or an npub")
	}
	return strings.ToLower(s), nil
}
