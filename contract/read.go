package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Given is the contract as a team member reads it: what the trial gave
// it. Read fills it; the reference agent and the ACP bridge both use it.
type Given struct {
	RelayURL, Channel string
	// SecretKey (hex) and Token are never to be logged.
	SecretKey, PublicKey string
	Token                string
	LLMBaseURL, Model    string
	// System is the persona prompt, as the file holds it.
	System string
	// MaxRounds is TROUPE_MAX_ROUNDS; 0 when unset (the agent's default).
	MaxRounds  int
	Deadline   time.Time
	Workdir    string
	AgentID    string
	Home       string
	Generation Generation
	// MCPServers and SkillsDir are the task's, when it has them.
	MCPServers []MCPServer
	SkillsDir  string
}

// Read reads the contract from getenv. The identity, channel, prompt,
// deadline and working folder are required; with model, the gateway's
// token, URL and model too (a bridge leaves them to the agent it hosts).
// Every problem is reported, each naming its variable.
func Read(getenv func(string) string, model bool) (Given, error) {
	var g Given
	var errs []error
	need := func(name string) string {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", name))
		}
		return v
	}
	readFile := func(name string) string {
		path := need(name)
		if path == "" {
			return ""
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		return string(b)
	}
	g.RelayURL = need(EnvRelayURL)
	g.Channel = need(EnvChannel)
	g.SecretKey = strings.TrimSpace(readFile(EnvPrivateKeyFile))
	if g.SecretKey != "" {
		pk, err := nostr.GetPublicKey(g.SecretKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the file does not hold a hex secret key", EnvPrivateKeyFile))
		}
		g.PublicKey = pk
	}
	if model {
		g.LLMBaseURL = strings.TrimSuffix(need(EnvLLMBaseURL), "/")
		g.Model = need(EnvModel)
		g.Token = strings.TrimSpace(readFile(EnvLLMTokenFile))
	}
	g.System = readFile(EnvSystemPromptFile)
	if v := strings.TrimSpace(getenv(EnvMaxRounds)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a whole number (0 for the default)", EnvMaxRounds, v))
		}
		g.MaxRounds = n
	}
	if v := need(EnvDeadline); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not an RFC 3339 time", EnvDeadline, v))
		}
		g.Deadline = t
	}
	g.Workdir = need(EnvWorkdir)
	if g.Workdir != "" {
		if info, err := os.Stat(g.Workdir); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("%s=%q is not a folder", EnvWorkdir, g.Workdir))
		}
	}
	g.AgentID = strings.TrimSpace(getenv(EnvAgentID))
	g.Home = strings.TrimSpace(getenv("HOME"))
	var genErrs []error
	g.Generation, genErrs = readGeneration(getenv)
	errs = append(errs, genErrs...)
	servers, err := decodeMCPServers(getenv(EnvMCPServers))
	if err != nil {
		errs = append(errs, err)
	}
	g.MCPServers = servers
	g.SkillsDir = strings.TrimSpace(getenv(EnvSkillsDir))
	return g, errors.Join(errs...)
}

// readGeneration reads the manifest's generation settings; each is
// optional.
func readGeneration(getenv func(string) string) (Generation, []error) {
	var g Generation
	var errs []error
	g.ThinkingEffort = strings.TrimSpace(getenv(EnvThinkingEffort))
	for _, f := range []struct {
		name string
		into *int64
	}{{EnvMaxOutputTokens, &g.MaxOutputTokens}, {EnvContextWindowTokens, &g.ContextWindowTokens},
		{EnvCompactAtPercent, &g.CompactAtPercent}, {EnvCompactAtTokens, &g.CompactAtTokens}} {
		if v := strings.TrimSpace(getenv(f.name)); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q is not a whole number above 0", f.name, v))
				continue
			}
			*f.into = n
		}
	}
	if v := strings.TrimSpace(getenv(EnvGenerationExtra)); v != "" {
		if err := json.Unmarshal([]byte(v), &g.Extra); err != nil {
			errs = append(errs, fmt.Errorf("%s is not a JSON object: %v", EnvGenerationExtra, err))
		}
	}
	return g, errs
}
