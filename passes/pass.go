package passes

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onnxpe/onnxpe/graph"
)

// Pass is one analysis or rewrite, with the type T of its result. Passes
// are package-level values (the shape of golang.org/x/tools/go/analysis):
// Requires names the passes that must run first, and Run reads their
// results with Result, typed by the pass it asks for.
type Pass[T any] struct {
	// Name is a short identifier (lower case, unique).
	Name string
	// Doc says what the pass finds or does, first line a summary.
	Doc string
	// Requires lists the passes that must run first: the only ones whose
	// results Run may read.
	Requires []Analyzer
	// Run computes the pass's result.
	Run func(*Context) (T, error)
}

// Analyzer is a pass of any result type: what Requires lists, Order sorts
// and Run runs.
type Analyzer interface {
	// String is the pass's name.
	String() string
	spec() (doc string, requires []Analyzer, runs bool)
	run(*Context) (any, error)
}

func (p *Pass[T]) String() string { return p.Name }

func (p *Pass[T]) spec() (string, []Analyzer, bool) { return p.Doc, p.Requires, p.Run != nil }

func (p *Pass[T]) run(c *Context) (any, error) { return p.Run(c) }

// Result is the result of p in c. Inside a pass's Run, p must be among
// the passes that pass requires (directly or through others): reading
// another's result is a defect of the pass, and panics.
func Result[T any](c *Context, p *Pass[T]) T {
	r, ok := c.results[p]
	if !ok {
		panic(fmt.Sprintf("passes: the result of %s is read before it ran", p.Name))
	}
	if c.current != nil && !c.requires(c.current, p) {
		panic(fmt.Sprintf("passes: %s reads the result of %s, which it does not require", c.current, p.Name))
	}
	return r.(T)
}

// Analyzers lists passes of one result type as Analyzers (for Requires,
// Order and Run).
func Analyzers[T any](ps ...*Pass[T]) []Analyzer {
	out := make([]Analyzer, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// Ran reports whether p ran in c, and its result.
func Ran[T any](c *Context, p *Pass[T]) (T, bool) {
	r, ok := c.results[p]
	if !ok {
		var zero T
		return zero, false
	}
	return r.(T), true
}

// Options configure a run of passes.
type Options struct {
	// Trace records near-misses of the detectors (Context.Miss).
	Trace bool
	// MaxProbePositions bounds the sequence length of numeric probes.
	MaxProbePositions int
	// Rewrite configures the rewrite passes.
	Rewrite RewriteOptions
	// AuditGraph audits a graph that a generation op (BeamSearch and the
	// like) runs as a model of its own, for the generation pass. The
	// audit sets it to itself; without it those graphs are left out.
	AuditGraph func(m *graph.Model, where string, opts Options) (*Report, *Context, error)
}

// Context is what a pass sees: the original model (never changed by a
// detector), the results of the passes that ran before, and the trace.
type Context struct {
	// Model is the caller's model. Detectors must not change it.
	Model   *graph.Model
	Options Options

	results  map[Analyzer]any
	closure  map[Analyzer]map[Analyzer]bool // what each pass requires, transitively
	current  Analyzer                       // the pass running
	trace    *Trace
	timings  map[string]time.Duration
	running  map[string]bool
	runCount map[string]int
}

// Runs reports whether the pass named name is one of this context's.
func (c *Context) Runs(name string) bool { return c.running[name] }

// RunCount is how many times the pass named name ran in this context
// (each pass runs once per context; tests count audits with it).
func (c *Context) RunCount(name string) int { return c.runCount[name] }

// Miss records a near-miss of rule at a place: why a candidate was not
// matched. score orders near-misses of the same rule (higher got further);
// the trace keeps the best one per rule and place kind.
func (c *Context) Miss(rule, at, reason string, score int) {
	if c.trace != nil {
		c.trace.add(rule, at, reason, score)
	}
}

// Run runs the given passes and those they require, each once, in
// dependency order, and returns the context holding every result.
func Run(m *graph.Model, opts Options, passes ...Analyzer) (*Context, error) {
	ctx := &Context{Model: m, Options: opts, results: map[Analyzer]any{}, closure: map[Analyzer]map[Analyzer]bool{},
		timings: map[string]time.Duration{}, running: map[string]bool{}, runCount: map[string]int{}}
	if opts.Trace {
		ctx.trace = &Trace{}
	}
	return ctx, ctx.Run(passes...)
}

// Run runs more passes in c: those given and what they require that has
// not run in c yet (a rewrite after the audit whose context it is: the
// detectors do not run again).
func (c *Context) Run(passes ...Analyzer) error {
	order, err := Order(passes...)
	if err != nil {
		return err
	}
	for _, p := range order {
		c.running[p.String()] = true
	}
	for _, p := range order {
		if _, done := c.results[p]; done {
			continue
		}
		c.closure[p] = closure(p)
		t0 := time.Now()
		c.current = p
		r, err := p.run(c)
		c.current = nil
		c.timings[p.String()] += time.Since(t0)
		c.runCount[p.String()]++
		if err != nil {
			return fmt.Errorf("pass %s: %w", p, err)
		}
		c.results[p] = r
	}
	return nil
}

// requires reports whether p requires q, directly or through others.
func (c *Context) requires(p, q Analyzer) bool { return p == q || c.closure[p][q] }

// closure is everything p requires, transitively.
func closure(p Analyzer) map[Analyzer]bool {
	out := map[Analyzer]bool{}
	var visit func(a Analyzer)
	visit = func(a Analyzer) {
		_, req, _ := a.spec()
		for _, r := range req {
			if !out[r] {
				out[r] = true
				visit(r)
			}
		}
	}
	visit(p)
	return out
}

// Timings reports how long each pass ran, in the order they ran.
func (c *Context) Timings() map[string]time.Duration { return c.timings }

// Trace returns the near-misses recorded (nil unless Options.Trace).
func (c *Context) Trace() []Miss {
	if c.trace == nil {
		return nil
	}
	return c.trace.list()
}

// ErrCycle is returned by Order when passes require each other.
var ErrCycle = errors.New("passes require each other")

// Order lists passes and everything they require so that each comes after
// its requirements; ties keep the order given. It checks that every pass
// has a name (unique), a doc and a Run, and that no passes require each
// other.
func Order(passes ...Analyzer) ([]Analyzer, error) {
	var out []Analyzer
	state := map[Analyzer]int{} // 1 visiting, 2 done
	names := map[string]Analyzer{}
	var visit func(p Analyzer, path []string) error
	visit = func(p Analyzer, path []string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("%w: %s", ErrCycle, strings.Join(append(path, p.String()), " -> "))
		case 2:
			return nil
		}
		name := p.String()
		if q, ok := names[name]; ok && q != p {
			return fmt.Errorf("two passes are named %q", name)
		}
		names[name] = p
		doc, req, runs := p.spec()
		if name == "" || strings.TrimSpace(doc) == "" || !runs {
			return fmt.Errorf("pass %q: needs a name, a doc and a Run", name)
		}
		state[p] = 1
		for _, r := range req {
			if err := visit(r, append(path, name)); err != nil {
				return err
			}
		}
		state[p] = 2
		out = append(out, p)
		return nil
	}
	for _, p := range passes {
		if err := visit(p, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Miss is one near-miss of a detector rule.
type Miss struct {
	Rule   string `json:"rule"`
	At     string `json:"at"`
	Reason string `json:"reason"`
	Score  int    `json:"-"`
}

// Trace keeps the best near-miss per rule and place.
type Trace struct {
	best map[string]Miss
}

func (t *Trace) add(rule, at, reason string, score int) {
	if t.best == nil {
		t.best = map[string]Miss{}
	}
	k := rule + "\x00" + at
	if old, ok := t.best[k]; ok && old.Score >= score {
		return
	}
	t.best[k] = Miss{Rule: rule, At: at, Reason: reason, Score: score}
}

func (t *Trace) list() []Miss {
	out := make([]Miss, 0, len(t.best))
	for _, m := range t.best {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].At < out[j].At
	})
	return out
}
