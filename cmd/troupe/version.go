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

// versionString says which troupe this is: version, commit, Go, platform.
func versionString() string {
	v, commit, dirty := version, "", false
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
	if dirty {
		commit += "+changes"
	}
	if commit == "" {
		commit = "unknown commit"
	}
	return fmt.Sprintf("troupe %s (%s, %s, %s/%s)", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
