package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/troupebench/troupe/examples"
	"github.com/troupebench/troupe/llm"
	"github.com/troupebench/troupe/manifest"
)

type gatewayOptions struct {
	addr string
}

func newGatewayCmd(a *app) *cobra.Command {
	var opts gatewayOptions
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve troupe's metering LLM gateway on its own, for development",
		Long: `Serve the gateway troupe puts between agents and model providers: agents call
/v1/chat/completions (OpenAI) or /v1/messages (Anthropic) with a troupe token; the
gateway swaps in the endpoint's model and the real key from the host's environment,
and meters every call.

It prints a development token per configured endpoint (see docs/config.md) and, for
every mock endpoint (each configured one, with its scenario, and mock/<scenario> for
each built-in scenario), a token per script of its scenario: the agent that plays it,
as troupe relay's --member takes it (ID:ROLE:KIND; a script keyed by a role, lead, is
played by lead-1; the first script is the orchestrator). Then it writes one JSON line
per call to standard output until interrupted. Prices are zero and there are no
budgets here; troupe run takes both from the manifest.`,
		Example: `  troupe gateway
  troupe gateway --addr 127.0.0.1:3601 --config troupe.yaml
  curl -s $URL/v1/chat/completions -H "Authorization: Bearer $TOKEN" \
    -d '{"model":"x","messages":[{"role":"user","content":"Create /app/hello.txt"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			return runGateway(cmd.Context(), a.stdout, opts, cfg)
		},
	}
	cmd.Flags().StringVar(&opts.addr, "addr", "127.0.0.1:3601", "address to listen on")
	return cmd
}

func runGateway(ctx context.Context, out io.Writer, opts gatewayOptions, cfg *config) (err error) {
	g := llm.New(cfg.endpoints)
	g.Addr = opts.addr
	g.Scenarios = examples.Scenarios()
	if cfg.path != "" {
		g.ScenarioDir = filepath.Dir(cfg.path)
	}
	if err := g.Open(ctx); err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := g.Close(closeCtx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close gateway: %w", cerr))
		}
	}()

	trials, err := devTrials(g, cfg.endpoints, out)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "gateway listening on %s (OpenAI base URL %s/v1, Anthropic base URL %s)\n", g.URL(), g.URL(), g.URL())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tSCRIPT\tMEMBER\tTOKEN")
	for _, t := range trials {
		trial, openErr := g.OpenTrial(t.spec)
		if openErr != nil {
			return openErr
		}
		defer func() {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if cerr := trial.Close(closeCtx); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
		for _, a := range t.spec.Agents {
			// The dev tokens are printed for the person running troupe
			// gateway by hand: that is what they are for.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Endpoint, cmp.Or(t.scripts[a.ID], "-"), member(a), trial.Token(a.ID).Reveal())
		}
	}
	tw.Flush()
	<-ctx.Done()
	fmt.Fprintln(out, "stopping gateway")
	return nil
}

// devTrial is a trial troupe gateway opens, and the script each of its
// agents plays, by agent id (none for an agent of a real endpoint).
type devTrial struct {
	spec    llm.TrialSpec
	scripts map[string]string
}

// member is an agent as troupe relay's --member takes it: ID:ROLE:KIND,
// or the parts it has.
func member(a llm.AgentSpec) string {
	return strings.Join(slices.DeleteFunc([]string{a.ID, a.Role, a.Kind}, func(s string) bool { return s == "" }), ":")
}

// devTrials are the trials a hand-run gateway serves: one of a
// development agent per configured real endpoint, and one per mock
// endpoint (each configured one, and mock/<name> for each built-in
// scenario not configured as such) whose agents play each a script of its
// scenario (llm.Scenario.Cast), so that each mock plays the part it was
// written for among the teammates it expects. Their calls are recorded
// to out.
func devTrials(g *llm.Gateway, endpoints llm.Endpoints, out io.Writer) ([]devTrial, error) {
	var trials []devTrial
	dev := llm.TrialSpec{ID: "dev", Channel: "dev", Prices: map[string]manifest.Price{}}
	var mocks []string
	for _, name := range slices.Sorted(maps.Keys(endpoints)) {
		if endpoints[name].API == llm.Mock {
			mocks = append(mocks, name)
			continue
		}
		dev.Agents = append(dev.Agents, llm.AgentSpec{ID: "dev-" + strings.ReplaceAll(name, "/", "-"), Role: "dev", Endpoint: name, Log: out})
		dev.Prices[name] = manifest.Price{}
	}
	if len(dev.Agents) > 0 {
		trials = append(trials, devTrial{spec: dev})
	}
	builtIn, _ := fs.Glob(examples.Scenarios(), "*.yaml")
	for _, file := range builtIn {
		name := llm.MockPrefix + strings.TrimSuffix(file, ".yaml")
		if _, configured := endpoints[name]; !configured {
			mocks = append(mocks, name)
		}
	}
	for _, endpoint := range mocks {
		sc, err := g.ScenarioOf(endpoint)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: %w", endpoint, err)
		}
		t := devTrial{spec: llm.TrialSpec{ID: "dev-" + strings.ReplaceAll(endpoint, "/", "-"), Channel: "dev", Prices: map[string]manifest.Price{endpoint: {}}}, scripts: map[string]string{}}
		for _, a := range sc.Cast(endpoint) {
			a.Log = out
			t.spec.Agents = append(t.spec.Agents, a)
			t.scripts[a.ID] = sc.ScriptOf(a.ID, a.Role)
		}
		trials = append(trials, t)
	}
	return trials, nil
}
