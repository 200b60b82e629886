package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"github.com/troupebench/troupe/internal/termsafe"
)

// app is what every command shares: where output goes and the configuration,
// loaded once, on first use, by the commands that need it.
type app struct {
	// stdout and stderr are for people, and escape what passes through
	// (termsafe): much of what troupe prints quotes install scripts,
	// agents, verifiers and datasets, whose control sequences a terminal
	// would obey.
	stdout, stderr io.Writer
	// raw are the same streams unescaped, for output a program reads:
	// --json events and reports, HTML, a persona or a scenario to save, and
	// the streams of the commands that run inside trial containers (a
	// tunnel, a tar, JSON reports, ACP's logs), which troupe records as they
	// are and escapes only when it shows them.
	raw        struct{ stdout, stderr io.Writer }
	escaped    []*termsafe.Writer
	configFlag string
	cfg        *config
}

// newApp returns an app writing to stdout and stderr.
func newApp(stdout, stderr io.Writer) *app {
	out, errOut := termsafe.NewWriter(stdout), termsafe.NewWriter(stderr)
	a := &app{stdout: out, stderr: errOut, escaped: []*termsafe.Writer{out, errOut}}
	a.raw.stdout, a.raw.stderr = stdout, stderr
	return a
}

// output is where a command's results go: raw when a program reads them
// (JSON, HTML), escaped for people.
func (a *app) output(raw bool) io.Writer {
	if raw {
		return a.raw.stdout
	}
	return a.stdout
}

// progress is where a progress display that redraws its line goes (git's,
// as git clone shows it): standard error when it is a terminal, with
// carriage returns kept and every other control character escaped (a
// dataset's server writes into it); nil otherwise.
func (a *app) progress() io.Writer {
	f, ok := a.raw.stderr.(*os.File)
	if !ok {
		return nil
	}
	if info, err := f.Stat(); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	w := termsafe.NewProgressWriter(f)
	a.escaped = append(a.escaped, w)
	return w
}

// flush writes what the escaping writers hold: the start of a character
// the output ended in.
func (a *app) flush() {
	for _, w := range a.escaped {
		w.Flush()
	}
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   programName,
		Short: "Run benchmark trials of LLM agent teams and compare rosters",
		Long: `troupe runs benchmark trials of LLM agent teams in containers and compares rosters.

A manifest names a team: one orchestrator and any number of workers, each with a
model endpoint, a sha256-pinned persona prompt and a budget. Its condition hash is
identical to the original Python system's, so results pool across both.

The usual path:
  troupe validate team.yaml                       check a manifest and its pinned files
  troupe run solo.yaml team.yaml --tasks tasks/   run every roster on every task
  troupe compare jobs/job-...                     which roster is better, and at what cost
  troupe view jobs/job-...                        read the transcripts in a browser

Configuration comes from flags, then TROUPE_* environment variables, then a config
file: --config FILE, $TROUPE_CONFIG, ./troupe.yaml or $XDG_CONFIG_HOME/troupe/config.yaml.
See docs/config.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without this cobra prints an unknown command's suggestions itself.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.PersistentFlags().StringVar(&a.configFlag, "config", "", "config file (default $TROUPE_CONFIG, ./troupe.yaml, $XDG_CONFIG_HOME/troupe/config.yaml)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{command: cmd.CommandPath(), err: err}
	})
	root.AddCommand(
		newValidateCmd(a),
		newHashCmd(a),
		newPinCmd(a),
		newPersonasCmd(a),
		newRelayCmd(a),
		newGatewayCmd(a),
		newRunCmd(a),
		newTasksCmd(a),
		newDatasetsCmd(a), newStacksCmd(a), newScenarioCmd(a), newExportCmd(a), newReplayCmd(a),
		newCompareCmd(a), newPlanCmd(a),
		newViewCmd(a),
		newAgentCmd(a),
		newACPCmd(a),
		newCLICmd(a),
		newMCPCmd(),
		newCleanCmd(a),
		newImagesCmd(a),
		newDoctorCmd(a),
		newVersionCmd(a),
		newInitCmd(),
		newFenceCmd(),
		newSweepCmd(a),
		newTunnelCmd(),
		newCallCmd(a),
		newExecAsCmd(a), newLinkCmd(a), newCopySelfCmd(a),
	)
	wrapArgs(root)
	return root
}

// wrapArgs makes argument-count mistakes usage errors (exit status 2), for a
// command and its subcommands.
func wrapArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &usageError{command: cmd.CommandPath(), err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// settings returns a viper instance for the given keys with troupe's
// precedence: the command's flag (its name is the key with dashes), then
// TROUPE_<KEY>, then the config file.
func (a *app) settings(cmd *cobra.Command, keys ...string) (*viper.Viper, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	v := viper.New()
	v.SetEnvPrefix("troupe")
	for _, key := range keys {
		// Bind one by one: BindPFlags would also bind help and config.
		if err := v.BindEnv(key); err != nil {
			return nil, err
		}
		if f := cmd.Flags().Lookup(strings.ReplaceAll(key, "_", "-")); f != nil {
			if err := v.BindPFlag(key, f); err != nil {
				return nil, err
			}
		}
	}
	if err := v.MergeConfigMap(cfg.settings); err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.path, err)
	}
	return v, nil
}

// artifactRootFlag adds --artifact-root, which validate, pin and run share.
func artifactRootFlag(cmd *cobra.Command) {
	cmd.Flags().String("artifact-root", "", "folder that pinned paths are relative to (default: each manifest's folder)")
}

// artifactRoot resolves --artifact-root with troupe's precedence (the flag,
// TROUPE_ARTIFACT_ROOT, the config file's artifact_root) and returns it with
// the configuration.
func (a *app) artifactRoot(cmd *cobra.Command) (string, *config, error) {
	v, err := a.settings(cmd, "artifact_root")
	if err != nil {
		return "", nil, err
	}
	return v.GetString("artifact_root"), a.cfg, nil
}

// config loads the configuration file once.
func (a *app) config() (*config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	cfg, err := loadConfig(a.configFlag)
	if err != nil {
		return nil, err
	}
	a.cfg = cfg
	return cfg, nil
}

// exactArgs is cobra.ExactArgs with a message that names what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with a message that names what is expected.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return errors.New(cmd.CommandPath() + " needs " + what)
		}
		return nil
	}
}
