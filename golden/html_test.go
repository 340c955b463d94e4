package golden_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/internal/cli"
)

var (
	svgElem  = regexp.MustCompile(`(?s)<svg .*?</svg>`)
	embedded = regexp.MustCompile(`(?s)<script type="application/json" id="onnxpe-report">(.*?)</script>`)
)

// The HTML report of every golden model renders: `onnxpe audit --format
// html` exits 0, the page embeds exactly the golden JSON report, every
// finding has its section, and every SVG plot is well-formed (a malformed
// one shows nothing in a browser).
func TestGoldenHTMLReports(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "audit.html")
			var stdout, stderr bytes.Buffer
			code := cli.Run(&cli.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
				[]string{"audit", "--format", "html", "--name", c.name, "-o", out, c.path(t)})
			if code != 0 {
				t.Fatalf("onnxpe audit --format html: exit %d: %s", code, stderr.String())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			page := string(b)
			m := embedded.FindStringSubmatch(page)
			if m == nil {
				t.Fatal("the page embeds no JSON report")
			}
			golden, err := os.ReadFile(filepath.Join("testdata", c.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var got, want struct {
				Findings []struct {
					Scheme string `json:"scheme"`
				} `json:"findings"`
			}
			var gotAny, wantAny any
			for _, u := range []struct {
				b      []byte
				v, any any
			}{{[]byte(m[1]), &got, &gotAny}, {golden, &want, &wantAny}} {
				if err := json.Unmarshal(u.b, u.v); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(u.b, u.any); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(gotAny, wantAny) {
				t.Errorf("the page's report differs from the golden file:\n%s", firstDiff(golden, []byte(m[1])))
			}
			if n := strings.Count(page, `<article class="finding"`); n != len(want.Findings) {
				t.Errorf("%d finding sections for %d findings", n, len(want.Findings))
			}
			for _, f := range want.Findings {
				if !strings.Contains(page, `data-field="scheme">`+f.Scheme+`</span>`) {
					t.Errorf("no section for the %s finding", f.Scheme)
				}
			}
			svgs := svgElem.FindAllString(page, -1)
			if len(svgs) == 0 {
				t.Error("no plot (not even the layer map)")
			}
			for i, s := range svgs {
				d := xml.NewDecoder(strings.NewReader(s))
				for {
					_, err := d.Token()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("plot %d is not well-formed: %v", i, err)
					}
				}
			}
		})
	}
}
