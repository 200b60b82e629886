package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module's build information.
var version = ""

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print troupe's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(a.stdout, versionString())
			return err
		},
	}
}

// shortVersion is the version alone (v1.2.3, or dev-<commit>), as troupe
// labels what it creates with it.
func shortVersion() string {
	v, commit := buildVersion()
	if v == "dev" && commit != "" {
		return "dev-" + commit
	}
	return v
}

// buildVersion reads the version and commit from the build.
func buildVersion() (v, commit string) {
	v = version
	dirty := false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if dirty && commit != "" {
		commit += "+changes"
	}
	return v, commit
}

// versionString says which troupe this is: version, commit, Go, platform.
func versionString() string {
	v, commit := buildVersion()
	if commit == "" {
		commit = "unknown commit"
	}
	return fmt.Sprintf("troupe %s (%s, %s, %s/%s)", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
