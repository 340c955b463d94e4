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
		Use:     "version",
		Short:   "Print the version of onnxpe",
		Long:    "Version prints onnxpe's version, the commit it was built from and the Go version.\n\n" + exitCodesHelp,
		Example: "  onnxpe version\n  onnxpe version --json",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return versionRun(opts) },
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func moduleVersion() (version, commit string) {
	version = Version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	if version == "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			commit = s.Value
		}
	}
	if version == "" {
		version = "(devel)"
	}
	return version, commit
}

func versionRun(opts *versionOptions) error {
	v, commit := moduleVersion()
	if opts.JSON {
		return writeJSON(opts.IO, map[string]string{"version": v, "commit": commit, "go": runtime.Version()})
	}
	fmt.Fprintf(opts.IO.Out, "onnxpe %s", v)
	if commit != "" {
		fmt.Fprintf(opts.IO.Out, " (%.12s)", commit)
	}
	fmt.Fprintf(opts.IO.Out, " %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

func writeJSON(ios *IOStreams, v any) error {
	enc := json.NewEncoder(ios.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
