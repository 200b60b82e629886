package llm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/troupebench/troupe/modelcall"
)

// probeTimeout bounds one endpoint's probe.
const probeTimeout = 10 * time.Second

// Probe asks an endpoint's upstream for its list of models, with the
// endpoint's key, as a pre-flight check costs nothing: an upstream that
// cannot be reached or that refuses the key is an error that says what to
// check; any other answer (some OpenAI-compatible servers have no models
// route) shows it is there. A mock endpoint needs no probe.
func (g *Gateway) Probe(ctx context.Context, name string) error {
	ep, ok := g.endpoint(name)
	if !ok {
		return fmt.Errorf("endpoint %q is not configured (add it under endpoints:, or name it mock/<scenario>)", name)
	}
	if ep.API == Mock {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	base := strings.TrimSuffix(ep.BaseURL, "/")
	u := base + "/models"
	if ep.API == modelcall.Anthropic {
		u = base + "/v1/models"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("endpoint %s: base_url %q: %w", name, ep.BaseURL, err)
	}
	if key, ok := g.keys[ep.Name]; ok {
		if ep.API == modelcall.Anthropic {
			req.Header.Set("X-Api-Key", key.Reveal())
			req.Header.Set("anthropic-version", "2023-06-01")
		} else {
			req.Header.Set("Authorization", "Bearer "+key.Reveal())
		}
	}
	resp, err := g.Transport.RoundTrip(req)
	if err != nil {
		msg := string(g.scrubber.Scrub([]byte(err.Error())))
		return fmt.Errorf("endpoint %s cannot be reached at %s: %s (is base_url right, and the server up?)", name, ep.BaseURL, msg)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		which := "no key"
		if ep.APIKeyEnv != "" {
			which = "the key in $" + ep.APIKeyEnv
		}
		return fmt.Errorf("endpoint %s: %s answered %d to %s: it refuses %s", name, ep.BaseURL, resp.StatusCode, u, which)
	}
	return nil
}
