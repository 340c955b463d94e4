// Command testsummary reads `go test -json` output on stdin, prints the
// output of failed tests, every skipped test with its reason, and a closing
// line "N passed, N failed, N skipped". It exits 1 when a test or package
// failed. It is a build helper for `make test`, not part of onnxpe.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// countLine matches the lines in which a test reports its own counts (the
// conformance suites): they are printed even when the test passes.
var countLine = regexp.MustCompile(`\d+ passed, \d+ failed, \d+ skipped|: skipped \d+ \(|: skipped for `)

func main() {
	out := map[string][]string{}
	var counts []string
	var passed, failed, skipped int
	var failures, skips []string
	pkgFailed := map[string]bool{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // build errors and the like
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			out[key] = append(out[key], e.Output)
			if e.Test != "" && countLine.MatchString(e.Output) {
				line := strings.TrimSpace(e.Output)
				if len(line) > 400 {
					line = line[:397] + "..."
				}
				counts = append(counts, fmt.Sprintf("  %s: %s", e.Test, line))
			}
			if e.Test == "" && strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") && e.Test == "" {
				fmt.Print(e.Output)
			}
		case "pass":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				passed++
			}
		case "fail":
			if e.Test == "" {
				pkgFailed[e.Package] = true
				continue
			}
			if !strings.Contains(e.Test, "/") {
				failed++
			}
			failures = append(failures, key)
		case "skip":
			if e.Test == "" {
				continue
			}
			skipped++
			reason := ""
			for _, l := range out[key] {
				l = strings.TrimSpace(l)
				if strings.Contains(l, ".go:") {
					reason = l
				}
			}
			skips = append(skips, fmt.Sprintf("%s: %s", key, reason))
		}
	}
	if len(counts) > 0 {
		fmt.Printf("\ncounts reported by tests:\n%s\n", strings.Join(counts, "\n"))
	}
	sort.Strings(skips)
	for _, f := range failures {
		fmt.Printf("\n--- FAIL %s\n%s", f, strings.Join(out[f], ""))
	}
	if len(skips) > 0 {
		fmt.Printf("\nskipped tests:\n")
		for _, s := range skips {
			fmt.Printf("  %s\n", s)
		}
	}
	for p := range pkgFailed {
		if len(failures) == 0 {
			fmt.Printf("\npackage %s failed:\n%s", p, strings.Join(out[p+" "], ""))
		}
	}
	fmt.Printf("\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(pkgFailed) > 0 {
		os.Exit(1)
	}
}
