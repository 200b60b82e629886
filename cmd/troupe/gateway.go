package main

import (
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

It prints one development token per configured endpoint (see docs/config.md) and one
per script of every built-in mock scenario (endpoint mock/<scenario>), then writes one
JSON line per call to standard output until interrupted. Prices are zero and there are
no budgets here; troupe run takes both from the manifest.`,
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

	// One development agent per configured endpoint; and, for each built-in
	// scenario, a trial of its own with one agent per script, so each mock
	// plays the part it was written for among the teammates it expects.
	var specs []llm.TrialSpec
	if len(cfg.endpoints) > 0 {
		spec := llm.TrialSpec{ID: "dev", Channel: "dev", Prices: map[string]manifest.Price{}}
		for _, name := range slices.Sorted(maps.Keys(cfg.endpoints)) {
			spec.Agents = append(spec.Agents, llm.AgentSpec{ID: "dev-" + strings.ReplaceAll(name, "/", "-"), Role: "dev", Endpoint: name, Log: out})
			spec.Prices[name] = manifest.Price{}
		}
		specs = append(specs, spec)
	}
	names, _ := fs.Glob(examples.Scenarios(), "*.yaml")
	for _, file := range names {
		data, _ := fs.ReadFile(examples.Scenarios(), file)
		sc, err := llm.LoadScenario(file, data)
		if err != nil {
			return fmt.Errorf("built-in scenario %s: %w", file, err)
		}
		endpoint := llm.MockPrefix + sc.Name
		if _, configured := cfg.endpoints[endpoint]; configured {
			continue
		}
		spec := llm.TrialSpec{ID: "dev-" + sc.Name, Channel: "dev", Prices: map[string]manifest.Price{endpoint: {}}}
		for _, role := range sc.Scripts() {
			kind := "worker"
			if role == "lead" || role == "solo" || role == "driver" {
				kind = "orchestrator"
			}
			spec.Agents = append(spec.Agents, llm.AgentSpec{ID: role + "-1", Role: role, Kind: kind, Endpoint: endpoint, Log: out})
		}
		specs = append(specs, spec)
	}

	fmt.Fprintf(out, "gateway listening on %s (OpenAI base URL %s/v1, Anthropic base URL %s)\n", g.URL(), g.URL(), g.URL())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tAGENT\tTOKEN")
	for _, spec := range specs {
		trial, openErr := g.OpenTrial(spec)
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
		for _, a := range spec.Agents {
			// The dev tokens are printed for the person running troupe
			// gateway by hand: that is what they are for.
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Endpoint, a.ID, trial.Token(a.ID).Reveal())
		}
	}
	tw.Flush()
	<-ctx.Done()
	fmt.Fprintln(out, "stopping gateway")
	return nil
}
