package passes

import (
	_ "embed"
	"strconv"
	"strings"
)

// Report is the audit of one model: the schemes found, the scheme reaching
// every attention layer, and the findings. Its JSON form is the report of
// `onnxpe audit --json` (see DESIGN.md and report.schema.json).
type Report struct {
	Model    string        `json:"model"`
	Schemes  []string      `json:"schemes"`
	Layers   []LayerScheme `json:"layers"`
	Findings []*Finding    `json:"findings"`
}

// LayerScheme is the scheme one attention layer receives.
type LayerScheme struct {
	Index  int    `json:"index"`
	Scheme string `json:"scheme"`
}

// LayerRanges prints sorted layer indexes as runs of consecutive ones,
// joined by dash within a run and sep between runs: [0 1 2 3 5] with "-"
// and "," is "0-3,5". No layers is "".
func LayerRanges(ls []int, dash, sep string) string {
	var parts []string
	for _, r := range runs(len(ls), func(k int) bool { return ls[k+1] == ls[k]+1 }) {
		parts = append(parts, rangeString(ls[r[0]], ls[r[1]], dash))
	}
	return strings.Join(parts, sep)
}

// SchemeRuns prints the scheme of every layer in runs of consecutive
// layers with one scheme: "0-2 rope, 3 nope" with dash "-".
func SchemeRuns(ls []LayerScheme, dash string) string {
	var parts []string
	for _, r := range runs(len(ls), func(k int) bool { return ls[k+1].Scheme == ls[k].Scheme && ls[k+1].Index == ls[k].Index+1 }) {
		parts = append(parts, rangeString(ls[r[0]].Index, ls[r[1]].Index, dash)+" "+ls[r[0]].Scheme)
	}
	return strings.Join(parts, ", ")
}

// runs splits 0..n-1 into maximal runs [i, j] in which next(k) says that
// k+1 continues k's run.
func runs(n int, next func(k int) bool) [][2]int {
	var out [][2]int
	for i := 0; i < n; {
		j := i
		for j+1 < n && next(j) {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j + 1
	}
	return out
}

// rangeString is "a" or "a<dash>b".
func rangeString(a, b int, dash string) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return strconv.Itoa(a) + dash + strconv.Itoa(b)
}

// ReportSchema is the JSON Schema (draft 2020-12) of a Report.
//
//go:embed report.schema.json
var ReportSchema []byte
