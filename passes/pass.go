package passes

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/onnxpe/onnxpe/graph"
)

// Pass is one analysis or rewrite. Passes are package-level values; Requires
// names the passes whose results Run reads from Context.ResultOf.
type Pass struct {
	// Name is a short identifier (lower case, unique).
	Name string
	// Doc says what the pass finds or does, first line a summary.
	Doc string
	// Requires lists the passes that must run first.
	Requires []*Pass
	// Run computes the pass's result.
	Run func(*Context) (any, error)
}

func (p *Pass) String() string { return p.Name }

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
// detector), the results of the passes it requires, and the trace.
type Context struct {
	// Model is the caller's model. Detectors must not change it.
	Model *graph.Model
	// ResultOf holds the results of the passes that ran before.
	ResultOf map[*Pass]any
	Options  Options

	trace   *Trace
	timings map[string]time.Duration
	running map[string]bool
}

// Runs reports whether the pass named name is one of this run's.
func (c *Context) Runs(name string) bool { return c.running[name] }

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
func Run(m *graph.Model, opts Options, passes ...*Pass) (*Context, error) {
	order, err := Order(passes...)
	if err != nil {
		return nil, err
	}
	ctx := &Context{Model: m, ResultOf: map[*Pass]any{}, Options: opts, timings: map[string]time.Duration{}, running: map[string]bool{}}
	for _, p := range order {
		ctx.running[p.Name] = true
	}
	if opts.Trace {
		ctx.trace = &Trace{}
	}
	for _, p := range order {
		t0 := time.Now()
		r, err := p.Run(ctx)
		ctx.timings[p.Name] = time.Since(t0)
		if err != nil {
			return ctx, fmt.Errorf("pass %s: %w", p.Name, err)
		}
		ctx.ResultOf[p] = r
	}
	return ctx, nil
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
// its requirements; ties keep the order given. It checks that names are
// unique and docs are not empty.
func Order(passes ...*Pass) ([]*Pass, error) {
	var out []*Pass
	state := map[*Pass]int{} // 1 visiting, 2 done
	names := map[string]*Pass{}
	var visit func(p *Pass, path []string) error
	visit = func(p *Pass, path []string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("%w: %s", ErrCycle, strings.Join(append(path, p.Name), " -> "))
		case 2:
			return nil
		}
		if q, ok := names[p.Name]; ok && q != p {
			return fmt.Errorf("two passes are named %q", p.Name)
		}
		names[p.Name] = p
		if p.Name == "" || strings.TrimSpace(p.Doc) == "" || p.Run == nil {
			return fmt.Errorf("pass %q: needs a name, a doc and a Run", p.Name)
		}
		state[p] = 1
		for _, r := range p.Requires {
			if err := visit(r, append(path, p.Name)); err != nil {
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
