package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// libraryPath is the module of the zkrecipes library.
const libraryPath = "github.com/zkrecipes/zkrecipes"

func (a *app) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print zkr's version and the source revision it was built from",
		Long: `Print the version of the zkr module and of the zkrecipes library it was built
with, as the Go toolchain recorded them in the binary: a release's version when
installed with go install ...@vX.Y.Z, "(devel)" when built from a checkout. With
the revision, its time and "modified" for uncommitted changes when the build
recorded them (go build stamps them from the checkout's git unless
-buildvcs=false), else "revision unknown". zkr --version prints the same.`,
		Example: `  zkr version
  zkr --version`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(a.stdout, versionText())
			return nil
		},
	}
}

// versionText describes the running binary from its build information.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "zkr: no build information (not built with module support)\n"
	}
	return describeBuild(info)
}

// describeBuild renders info as zkr version prints it: what it does not
// record, it says it does not know.
func describeBuild(info *debug.BuildInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "zkr %s\n", moduleVersion(&info.Main))
	for _, d := range info.Deps {
		if d.Path == libraryPath {
			fmt.Fprintf(&b, "library %s %s\n", d.Path, moduleVersion(d))
		}
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(" modified")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision unknown (the build recorded none)\n")
	}
	fmt.Fprintf(&b, "built with %s\n", info.GoVersion)
	return b.String()
}

// moduleVersion is m's version, or its replacement's.
func moduleVersion(m *debug.Module) string {
	v := m.Version
	if m.Replace != nil {
		if m.Replace.Version != "" {
			v = m.Replace.Version
		} else {
			v = "(devel)"
		}
		v += " (replaced by " + m.Replace.Path + ")"
	}
	if v == "" {
		v = "(devel)"
	}
	return v
}
