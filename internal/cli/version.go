package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at link time (-ldflags "-X .../internal/cli.Version=v1.2.3");
// otherwise the module version from the build information is used.
var Version = ""

type versionOptions struct {
	IO   *IOStreams
	JSON bool
}

// NewCmdVersion builds `onnxpe version`.
func NewCmdVersion(ios *IOStreams) *cobra.Command {
	opts := &versionOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of onnxpe",
		Long: `Version prints onnxpe's version, the commit it was built from, whether
that checkout had changes not committed, and the Go version (onnxpe
--version prints the same line). They come from the build information
Go records: a go build or go install inside a git checkout records the
commit (the module version is then a pseudo-version naming it, with
+dirty for changes); a build outside one (Go 1.26 does not see a git
worktree, whose .git is a file), or with -buildvcs=false, records no
commit, and the line says so.

` + exitCodesHelp,
		Example: "  onnxpe version\n  onnxpe version --json\n  onnxpe --version",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return versionRun(opts) },
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// buildVersion is what the build information says of the binary.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// readVersion reads the version of the running binary.
func readVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(bi, Version)
}

// versionFrom reads a version from build information (nil: none), with
// linked, the version set at link time, taking precedence.
func versionFrom(bi *debug.BuildInfo, linked string) buildVersion {
	v := buildVersion{Version: linked, Go: runtime.Version()}
	if bi != nil {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			v.Go = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	return v
}

// line is the version as `onnxpe version` and `onnxpe --version` print it.
func (v buildVersion) line() string {
	s := "onnxpe " + v.Version
	switch {
	case v.Commit == "":
		s += " (no commit recorded: not built in a git checkout, or built with -buildvcs=false)"
	case v.Modified:
		s += " commit " + v.Commit + " (modified: the checkout had uncommitted changes)"
	default:
		s += " commit " + v.Commit
	}
	return s + " " + v.Go + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func versionRun(opts *versionOptions) error {
	v := readVersion()
	if opts.JSON {
		return writeJSON(opts.IO, v)
	}
	_, err := fmt.Fprintln(opts.IO.Out, v.line())
	return err
}

func writeJSON(ios *IOStreams, v any) error {
	enc := json.NewEncoder(ios.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
