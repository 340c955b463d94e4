package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo: the module version, the commit and the
// modified flag are read from the build information, the version set at
// link time wins, and a build without VCS information says so.
func TestVersionFromBuildInfo(t *testing.T) {
	const rev = "2ff2162d305cbf28b1b0934f487d77556e63b0d1"
	bi := func(version string, settings ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/onnxpe/onnxpe", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		linked string
		want   buildVersion
		line   []string
	}{
		{"clean checkout", bi("v0.0.0-20261202055401-2ff2162d305c", "vcs", "git", "vcs.revision", rev, "vcs.modified", "false"), "",
			buildVersion{"v0.0.0-20261202055401-2ff2162d305c", rev, false, "go1.26.8"},
			[]string{"onnxpe v0.0.0-20261202055401-2ff2162d305c commit " + rev + " go1.26.8 "}},
		{"modified checkout", bi("v0.0.0-20261202055401-2ff2162d305c+dirty", "vcs.revision", rev, "vcs.modified", "true"), "",
			buildVersion{"v0.0.0-20261202055401-2ff2162d305c+dirty", rev, true, "go1.26.8"},
			[]string{"commit " + rev + " (modified: the checkout had uncommitted changes)"}},
		{"go install of a release", bi("v1.2.3"), "",
			buildVersion{"v1.2.3", "", false, "go1.26.8"},
			[]string{"onnxpe v1.2.3 (no commit recorded"}},
		{"no VCS", bi("(devel)"), "", buildVersion{"(devel)", "", false, "go1.26.8"}, []string{"-buildvcs=false"}},
		{"linked", bi("(devel)", "vcs.revision", rev), "v9.9.9", buildVersion{"v9.9.9", rev, false, "go1.26.8"}, []string{"onnxpe v9.9.9 commit " + rev}},
	} {
		got := versionFrom(tc.bi, tc.linked)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		for _, w := range tc.line {
			if !strings.Contains(got.line(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, got.line(), w)
			}
		}
	}
	if v := versionFrom(nil, ""); v.Version != "(devel)" || v.Commit != "" || v.Go == "" {
		t.Errorf("no build information: %+v", v)
	}
}

// TestVersionFlag: onnxpe --version prints what onnxpe version prints.
func TestVersionFlag(t *testing.T) {
	code, flag, _ := runCLI(t, "--version")
	code2, cmd, _ := runCLI(t, "version")
	if code != 0 || code2 != 0 || flag != cmd || !strings.HasPrefix(flag, "onnxpe ") || strings.Count(flag, "\n") != 1 {
		t.Errorf("--version: exit %d %q; version: exit %d %q", code, flag, code2, cmd)
	}
}
