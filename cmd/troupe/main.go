// Command troupe runs benchmark trials of LLM agent teams in containers and
// compares rosters. This package is only the command line: cobra commands,
// configuration through viper, and the wiring of troupe's packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/troupebench/troupe/contract"
)

func main() {
	// The Compose loader logs through logrus what troupe reports itself
	// (task warnings): its lines would only interleave with troupe's.
	logrus.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopWithGoRun()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes: 0 success, 1 the command ran and found problems (an invalid
// manifest, a stale pin) or failed, 2 the command line itself was wrong, 3
// troupe run finished but some trials could not be measured (the harness
// failed them: unscored_infra after every retry).
const (
	exitOK         = 0
	exitFailed     = 1
	exitUsage      = 2
	exitUnmeasured = 3
	programName    = "troupe"
)

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// From here on, stdout and stderr are escaped (app): an error may
	// quote what a container printed.
	a := newApp(stdout, stderr)
	defer a.flush()
	stdout, stderr = a.stdout, a.stderr
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if silent, ok := errors.AsType[*reportedError](err); ok {
		return silent.code
	}
	fmt.Fprintf(stderr, "%s: %v\n", programName, err)
	if _, ok := errors.AsType[*contract.CannotWorkError](err); ok {
		return contract.ExitCannotWork
	}
	if usage, ok := errors.AsType[*usageError](err); ok {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", usage.command)
		return exitUsage
	}
	return exitFailed
}

// reportedError ends a command whose problems were already printed in the
// command's own format; it only carries the exit code.
type reportedError struct{ code int }

func (e *reportedError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a mistake on the command line: a bad flag or argument.
type usageError struct {
	command string
	err     error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
