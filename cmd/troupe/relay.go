package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip19"
	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/relay"
)

type relayOptions struct {
	addr         string
	channel      string
	members      []string
	orchestrator string
	authURLs     []string
	transcript   string
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
first member is its orchestrator unless --orchestrator says otherwise. A trial user key
is generated for the channel. Clients authenticate under the listen URL or any
--auth-url. The relay runs until interrupted (Ctrl+C), then closes cleanly, syncing
the transcript.`,
		Example: `  troupe relay --channel dev --member npub1... --member 3bf0c63f...
  troupe relay --addr 127.0.0.1:7447 --channel dev --member $LEAD --transcript -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRelay(cmd.Context(), a.stdout, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.addr, "addr", "127.0.0.1:7447", "address to listen on")
	f.StringVar(&opts.channel, "channel", "", "open a channel with this id")
	f.StringArrayVar(&opts.members, "member", nil, "a channel member's public key, hex or npub (repeat for each)")
	f.StringVar(&opts.orchestrator, "orchestrator", "", "the member whose DONE: ends the trial (default: the first member)")
	f.StringArrayVar(&opts.authURLs, "auth-url", []string{relay.ContainerURL}, "another URL clients may authenticate under (repeat for each)")
	f.StringVar(&opts.transcript, "transcript", "", `write the channel's transcript (JSON lines) to this file; "-" is standard output`)
	return cmd
}

func runRelay(ctx context.Context, out io.Writer, opts relayOptions) (err error) {
	if opts.channel == "" && len(opts.members) > 0 {
		return &usageError{command: "troupe relay", err: errors.New("--member needs --channel")}
	}
	if opts.channel != "" && len(opts.members) == 0 {
		return &usageError{command: "troupe relay", err: errors.New("--channel needs at least one --member")}
	}
	members := make([]relay.Member, len(opts.members))
	for i, m := range opts.members {
		pk, err := parsePubkey(m)
		if err != nil {
			return &usageError{command: "troupe relay", err: fmt.Errorf("--member %s: %w", m, err)}
		}
		members[i] = relay.Member{Pubkey: pk, ID: fmt.Sprintf("member-%d", i+1)}
	}
	orchestrator := ""
	if len(members) > 0 {
		orchestrator = members[0].Pubkey
	}
	if opts.orchestrator != "" {
		if orchestrator, err = parsePubkey(opts.orchestrator); err != nil {
			return &usageError{command: "troupe relay", err: fmt.Errorf("--orchestrator: %w", err)}
		}
	}

	// The transcript is opened first so that it is closed last, after the
	// relay has synced it.
	var transcript io.Writer
	switch opts.transcript {
	case "":
	case "-":
		transcript = out
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
		if _, err := r.OpenChannel(relay.ChannelConfig{
			ID: opts.channel, Name: opts.channel, Members: members, Orchestrator: orchestrator,
			UserPubkey: userPK, UserSecretKey: userSK, Transcript: transcript,
		}); err != nil {
			return err
		}
		fmt.Fprintf(out, "channel %s open: %d members, orchestrator %s, trial user %s\n", opts.channel, len(members), orchestrator, userPK)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping relay")
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
