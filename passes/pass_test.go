package passes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
)

func TestOrderRefusesBadPipelines(t *testing.T) {
	run := func(*passes.Context) (int, error) { return 1, nil }
	a := &passes.Pass[int]{Name: "a", Doc: "a", Run: run}
	b := &passes.Pass[int]{Name: "b", Doc: "b", Run: run, Requires: []passes.Analyzer{a}}
	a.Requires = []passes.Analyzer{b}
	if _, err := passes.Order(b); !errors.Is(err, passes.ErrCycle) {
		t.Errorf("a cycle gives %v", err)
	}
	a.Requires = nil
	if got, err := passes.Order(b); err != nil || len(got) != 2 || got[0] != passes.Analyzer(a) {
		t.Errorf("Order(b) = %v, %v; want [a b]", got, err)
	}
	dup := &passes.Pass[string]{Name: "a", Doc: "another a", Run: func(*passes.Context) (string, error) { return "", nil }}
	if _, err := passes.Order(a, dup); err == nil {
		t.Error("two passes named a were accepted")
	}
	if _, err := passes.Order(&passes.Pass[int]{Name: "nodoc", Run: run}); err == nil {
		t.Error("a pass without doc was accepted")
	}
	if _, err := passes.Order(&passes.Pass[int]{Name: "norun", Doc: "no run"}); err == nil {
		t.Error("a pass without Run was accepted")
	}
}

// TestPassesReadOnlyWhatTheyRequire: a pass reads the result of a pass it
// requires (directly or through another), typed; reading one it does not
// require is a defect that Result reports (a panic), whether that pass ran
// or not.
func TestPassesReadOnlyWhatTheyRequire(t *testing.T) {
	m := graph.NewModel(8, "test")
	base := &passes.Pass[[]string]{Name: "base", Doc: "a list", Run: func(*passes.Context) ([]string, error) { return []string{"x"}, nil }}
	mid := &passes.Pass[int]{Name: "mid", Doc: "its length", Requires: []passes.Analyzer{base},
		Run: func(c *passes.Context) (int, error) { return len(passes.Result(c, base)), nil }}
	top := &passes.Pass[string]{Name: "top", Doc: "reads base through mid", Requires: []passes.Analyzer{mid},
		Run: func(c *passes.Context) (string, error) { return passes.Result(c, base)[0], nil }}
	c, err := passes.Run(m, passes.Options{}, top)
	if err != nil {
		t.Fatal(err)
	}
	if got := passes.Result(c, top); got != "x" {
		t.Errorf("top = %q", got)
	}
	if n := c.RunCount("base"); n != 1 {
		t.Errorf("base ran %d times", n)
	}
	// Running more passes in the context runs only what has not run.
	again := &passes.Pass[int]{Name: "again", Doc: "after mid", Requires: []passes.Analyzer{mid},
		Run: func(c *passes.Context) (int, error) { return passes.Result(c, mid) + 1, nil }}
	if err := c.Run(again); err != nil || passes.Result(c, again) != 2 || c.RunCount("base") != 1 || c.RunCount("mid") != 1 {
		t.Errorf("a second run in the context: %v, base ran %d times, mid %d", err, c.RunCount("base"), c.RunCount("mid"))
	}
	sneaky := &passes.Pass[int]{Name: "sneaky", Doc: "reads mid without requiring it", Requires: []passes.Analyzer{base},
		Run: func(c *passes.Context) (int, error) { return passes.Result(c, mid), nil }}
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), "does not require") {
				t.Errorf("reading a result not required: %v, want a panic saying so", r)
			}
		}()
		c.Run(sneaky)
	}()
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "before it ran") {
				t.Errorf("reading a result that did not run: %v", r)
			}
		}()
		c2, _ := passes.Run(m, passes.Options{}, base)
		passes.Result(c2, mid)
	}()
}
