package verify

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Options configure Compare and CompareReference. The zero value runs
// the default sweep in onnxpe's kernels with the default tolerances.
type Options struct {
	// Policy is the tolerance policy (zero: the defaults per type).
	Policy Policy
	// Seed seeds the synthesised values.
	Seed uint64
	// Seqs replaces the sweep's sequence lengths; Batches its batch sizes.
	Seqs    []int
	Batches []int
	// MaxLength caps the long sequence (0: DefaultMaxLength).
	MaxLength int
	// Inputs, when set, are the input sets to use instead of the sweep.
	Inputs []NamedInputs
	// Runtime says which executors run the models (zero: RuntimeGo).
	Runtime Runtime
	// PathA and PathB are the files the models were loaded from: ONNX
	// Runtime opens files (a model without one is saved to a temporary
	// folder first). They also name the models in reports.
	PathA, PathB string
	// Hints are facts about model A known beforehand (the audit's
	// findings); they override the analysis.
	Hints Hints
	// Bisect, when the outputs differ, compares the intermediate values
	// both graphs compute under the same name and names the first node
	// where they diverge.
	Bisect bool
	// Threads bounds the goroutines of onnxpe's kernels (0: all cores)
	// and ONNX Runtime's intra-op threads.
	Threads int
	// Progress, when set, is called before each run.
	Progress func(Progress)
	// Prepared, when set, is model A prepared already (Prepare, with the
	// hints the comparison would use): its analysis and session serve
	// instead of analysing A again and opening a session of its own.
	Prepared *Prepared
}

// NamedInputs is one given input set.
type NamedInputs struct {
	Name   string
	Inputs map[string]*kernels.Tensor
	// Outputs are reference outputs (CompareReference), by output name.
	Outputs map[string]*kernels.Tensor
}

// Progress reports the run about to start.
type Progress struct {
	Done, Total int
	// Step says what runs: "A go: long (batch 1, seq 256)".
	Step string
}

// ReportSchema is the JSON Schema (draft 2020-12) of a Report: what
// `onnxpe verify --json` prints (report.schema.json).
//
//go:embed report.schema.json
var ReportSchema []byte

// Report is the result of a comparison. Its JSON form is what
// `onnxpe verify --json` prints (ReportSchema).
type Report struct {
	A string `json:"a"`
	B string `json:"b"`
	// Reference is set when A was compared with stored outputs.
	Reference bool    `json:"reference,omitempty"`
	Runtime   Runtime `json:"runtime"`
	Equal     bool    `json:"equal"`
	// Summary is one line saying what was found.
	Summary string `json:"summary"`
	// Tolerances are those of the element types of the outputs.
	Tolerances map[string]Tolerance `json:"tolerances"`
	// Analysis is what the sweep was built from (nil for given inputs).
	Analysis *Analysis   `json:"analysis,omitempty"`
	Sets     []SetResult `json:"sets"`
	// Skipped are sweep sets model A does not accept, with the reason.
	Skipped  []Skipped   `json:"skipped,omitempty"`
	Warnings []string    `json:"warnings,omitempty"`
	Bisect   *Divergence `json:"bisect,omitempty"`
	// PromptThenDecode says how B ran when it is A with a KV cache
	// (onnxpe rewrite --add-kv-cache): each set as a prompt, then decode
	// steps; "" otherwise.
	PromptThenDecode string  `json:"prompt_then_decode,omitempty"`
	Seconds          float64 `json:"seconds"`
}

// SetResult compares the outputs of one input set in one pairing of
// runtimes.
type SetResult struct {
	Name string `json:"name"`
	// Pairing is "A go / B go", "A go / A ort", ...
	Pairing string `json:"pairing"`
	// AcrossRuntimes is true when the pairing is one model in two
	// runtimes (compared at Tolerance.AcrossRuntimes).
	AcrossRuntimes bool         `json:"across_runtimes,omitempty"`
	Spec           *SetSpec     `json:"spec,omitempty"`
	Inputs         []InputDesc  `json:"inputs"`
	Outputs        []OutputDiff `json:"outputs"`
	Equal          bool         `json:"equal"`
	// Error is set when one side could not run the set.
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

// InputDesc describes one fed input.
type InputDesc struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Role  Role   `json:"role,omitempty"`
}

// Skipped is a sweep set that was not run.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// side is one model in one runtime.
type side struct {
	model   string // "A" or "B"
	m       *graph.Model
	path    string
	rt      Runtime
	hidden  bool // run only for output shapes (ONNX Runtime's half outputs)
	outs    []map[string]*kernels.Tensor
	errs    []error
	seconds []float64
}

func (s *side) label() string { return s.model + " " + string(s.rt) }

// Compare runs models a and b on the same inputs (the sweep built from
// a's analysis, or opts.Inputs) and compares every output. It returns an
// error, and no report, when the pair cannot be compared: inputs that
// differ in name or type (wrapping ErrIncompatible), a model that cannot
// be loaded or run (*ModelError), a cancelled ctx.
func Compare(ctx context.Context, a, b *graph.Model, opts Options) (*Report, error) {
	start := time.Now()
	na, nb := label(opts.PathA, "model A"), label(opts.PathB, "model B")
	link, err := linkCache(a, b)
	if err != nil {
		return nil, err
	}
	feedsB := kernels.FeedInputs(b)
	if link != nil {
		feedsB = slices.DeleteFunc(feedsB, func(v *graph.Value) bool { return slices.Contains(link.past, v.Name) })
	}
	if err := compatible(kernels.FeedInputs(a), feedsB, na, nb); err != nil {
		return nil, err
	}
	var pairs [][2]string
	var warn []string
	if link == nil {
		if pairs, warn, err = matchOutputs(a, b, na, nb); err != nil {
			return nil, err
		}
	} else {
		for _, v := range a.Graph.Outputs {
			pairs = append(pairs, [2]string{v.Name, v.Name})
		}
		if opts.Bisect {
			warn = append(warn, "bisect: not done for a model B that decodes with a KV cache (its steps compute other values than A's run)")
			opts.Bisect = false
		}
	}
	rep := &Report{A: label(opts.PathA, "A"), B: label(opts.PathB, "B"), Runtime: runtimeOf(opts), Warnings: warn}
	if link != nil {
		rep.PromptThenDecode = link.describe()
	}
	c := &comparison{ctx: ctx, opts: &opts, rep: rep, a: a, b: b, spill: kernels.NewSpill(), link: link}
	defer c.spill.Close()
	if err := c.buildSets(); err != nil {
		return nil, err
	}
	sides, pairings := c.sides(a, b)
	if err := c.runSides(sides); err != nil {
		return nil, err
	}
	for _, pr := range pairings {
		c.compareSides(pr[0], pr[1], pairs)
	}
	if opts.Bisect && !c.equal() {
		d, err := c.bisect(a, b)
		if err != nil {
			rep.Warnings = append(rep.Warnings, "bisect: "+err.Error())
		}
		rep.Bisect = d
	}
	c.finish(start)
	return rep, nil
}

// CompareReference runs model a on given input sets (opts.Inputs, with
// their Outputs) and compares its outputs with the stored ones.
func CompareReference(ctx context.Context, a *graph.Model, ref string, opts Options) (*Report, error) {
	start := time.Now()
	if len(opts.Inputs) == 0 {
		return nil, errors.New("verify: no reference input sets")
	}
	rep := &Report{A: label(opts.PathA, "A"), B: ref, Reference: true, Runtime: runtimeOf(opts)}
	c := &comparison{ctx: ctx, opts: &opts, rep: rep, a: a, spill: kernels.NewSpill()}
	defer c.spill.Close()
	if err := c.buildSets(); err != nil {
		return nil, err
	}
	refSide := &side{model: "reference", rt: "stored"}
	c.stored = refSide
	for _, s := range opts.Inputs {
		refSide.outs = append(refSide.outs, s.Outputs)
		refSide.errs = append(refSide.errs, nil)
		refSide.seconds = append(refSide.seconds, 0)
	}
	var sides []*side
	switch rep.Runtime {
	case RuntimeGo:
		sides = []*side{{model: "A", m: a, path: opts.PathA, rt: RuntimeGo}}
	case RuntimeORT:
		sides = []*side{{model: "A", m: a, path: opts.PathA, rt: RuntimeORT}}
	default:
		sides = []*side{{model: "A", m: a, path: opts.PathA, rt: RuntimeGo}, {model: "A", m: a, path: opts.PathA, rt: RuntimeORT}}
	}
	if err := c.runSides(sides); err != nil {
		return nil, err
	}
	var pairs [][2]string
	for _, v := range a.Graph.Outputs {
		pairs = append(pairs, [2]string{v.Name, v.Name})
	}
	for _, s := range sides {
		c.compareSides(refSide, s, pairs)
	}
	c.finish(start)
	return rep, nil
}

func label(path, def string) string {
	if path != "" {
		return path
	}
	return def
}

func runtimeOf(o Options) Runtime {
	if o.Runtime == "" {
		return RuntimeGo
	}
	return o.Runtime
}

// compatible checks that a and b (named na and nb) take the same inputs.
func compatible(fa, fb []*graph.Value, na, nb string) error {
	byName := map[string]*graph.Value{}
	for _, v := range fb {
		byName[v.Name] = v
	}
	for _, v := range fa {
		w, ok := byName[v.Name]
		if !ok {
			return fmt.Errorf("%w: %s has no input %q", ErrIncompatible, nb, v.Name)
		}
		ta, tb := v.Type.ElemType(), w.Type.ElemType()
		if ta != tb {
			return fmt.Errorf("%w: input %q is %v in %s and %v in %s", ErrIncompatible, v.Name, ta, na, tb, nb)
		}
		da, oka := v.Type.Shape()
		db, okb := w.Type.Shape()
		if oka && okb {
			if len(da) != len(db) {
				return fmt.Errorf("%w: input %q has rank %d in %s and %d in %s", ErrIncompatible, v.Name, len(da), na, len(db), nb)
			}
			for i := range da {
				if da[i].Known && db[i].Known && da[i].Value != db[i].Value {
					return fmt.Errorf("%w: input %q is %v in %s and %v in %s", ErrIncompatible, v.Name, v.Type, na, w.Type, nb)
				}
			}
		}
		delete(byName, v.Name)
	}
	for _, v := range fb {
		if _, ok := byName[v.Name]; ok {
			return fmt.Errorf("%w: %s has no input %q", ErrIncompatible, na, v.Name)
		}
	}
	return nil
}

// matchOutputs pairs the outputs of a and b: by name, or by position
// (with a warning) when the names differ.
func matchOutputs(a, b *graph.Model, na, nb string) ([][2]string, []string, error) {
	oa, ob := a.Graph.Outputs, b.Graph.Outputs
	names := func(vs []*graph.Value) []string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Name)
		}
		return s
	}
	la, lb := names(oa), names(ob)
	sa, sb := slices.Clone(la), slices.Clone(lb)
	sort.Strings(sa)
	sort.Strings(sb)
	var pairs [][2]string
	if slices.Equal(sa, sb) {
		for _, n := range la {
			pairs = append(pairs, [2]string{n, n})
		}
		return pairs, nil, nil
	}
	if len(la) != len(lb) {
		return nil, nil, fmt.Errorf("%w: %s has %d outputs (%s), %s %d (%s)", ErrIncompatible,
			na, len(oa), strings.Join(la, ", "), nb, len(ob), strings.Join(lb, ", "))
	}
	for i := range la {
		pairs = append(pairs, [2]string{la[i], lb[i]})
	}
	return pairs, []string{fmt.Sprintf("output names differ (A: %s; B: %s): compared by position", strings.Join(la, ", "), strings.Join(lb, ", "))}, nil
}

// comparison is the state of one Compare or CompareReference.
type comparison struct {
	ctx  context.Context
	opts *Options
	rep  *Report
	a    *graph.Model
	b    *graph.Model // nil against reference outputs
	an   *Analysis
	sets []*inputSet
	// cached holds A's Go outputs from the planner's probes, by set key.
	cached map[string]map[string]*kernels.Tensor
	goA    runner
	done   int
	total  int
	// stored are the reference outputs of CompareReference: ONNX
	// Runtime's half-precision outputs are allocated like them.
	stored *side
	// spill holds the large outputs of the sides (and the planner's) out
	// of memory until they are compared; closed when the comparison ends.
	spill *kernels.Spill
	// link: B is A with a KV cache, run as a prompt then decode steps.
	link *cacheLink
}

// buildSets makes the input sets: the given ones, or the sweep planned
// from A's analysis (which runs A; its runner is kept for the sweep).
func (c *comparison) buildSets() error {
	o := c.opts
	if pr := o.Prepared; pr != nil && pr.m == c.a && pr.r != nil {
		return c.preparedSets(pr)
	}
	an := analyzeGraph(c.a)
	if an.OneRowChunks == "" && c.b != nil {
		// B's contract too: a rewrite that fused attention into
		// GroupQueryAttention takes chunks after a cache one row at a time.
		an.OneRowChunks = oneRowChunks(c.b.Graph)
	}
	c.an = an
	if len(o.Inputs) > 0 {
		an.applyHints(o.Hints, true)
		an.assignDims()
		for _, s := range o.Inputs {
			c.sets = append(c.sets, an.givenSet(s))
		}
		return nil
	}
	r, err := newGoRunner(c.a, o.Threads, nil)
	if err != nil {
		return &ModelError{Model: "A", Path: o.PathA, Runtime: RuntimeGo, Err: err}
	}
	c.goA = r
	p := &planner{a: an, opts: o, cached: map[string]map[string]*kernels.Tensor{}, eval: r.s.Eval, spill: c.spill}
	p.run = func(s SetSpec) (map[string]*kernels.Tensor, error) {
		if err := c.ctx.Err(); err != nil {
			return nil, err
		}
		set, err := an.synthesize(s, o.Seed)
		if err != nil {
			return nil, err
		}
		c.progress("A go: " + s.Name)
		return runInto(r, set.inputs, nil, c.spill)
	}
	if err := p.analyze(); err != nil {
		var me *ModelError
		if errors.As(err, &me) {
			me.Path = o.PathA
		}
		return err
	}
	c.cached = p.cached
	c.rep.Analysis = an
	c.rep.Warnings = append(c.rep.Warnings, an.Notes...)
	for _, s := range p.specs() {
		set, err := an.synthesize(s, o.Seed)
		if err != nil {
			return err
		}
		set.spec.required = s.required
		c.sets = append(c.sets, set)
	}
	return nil
}

// preparedSets are buildSets with A prepared: given sets, or the sweep
// planned when A was prepared; A's runs use its session.
func (c *comparison) preparedSets(pr *Prepared) error {
	o := c.opts
	c.goA = kept{pr.r}
	if len(o.Inputs) > 0 {
		an := analyzeGraph(c.a)
		an.applyHints(o.Hints, true)
		an.assignDims()
		c.an = an
		for _, s := range o.Inputs {
			c.sets = append(c.sets, an.givenSet(s))
		}
		return nil
	}
	an := pr.an
	c.an = an
	if pr.seed == o.Seed {
		c.cached = pr.p.cached // A's outputs on the sets the plan ran
	}
	c.rep.Analysis = an
	c.rep.Warnings = append(c.rep.Warnings, an.Notes...)
	for _, s := range pr.p.specs() {
		set, err := an.synthesize(s, o.Seed)
		if err != nil {
			return err
		}
		set.spec.required = s.required
		c.sets = append(c.sets, set)
	}
	return nil
}

// givenSet wraps given inputs, reading positions from a position-id
// input when there is one.
func (a *Analysis) givenSet(s NamedInputs) *inputSet {
	set := &inputSet{name: s.Name, inputs: s.Inputs}
	var mask *kernels.Tensor
	for _, in := range a.Inputs {
		t := s.Inputs[in.Name]
		if t == nil {
			continue
		}
		for i, d := range in.Dims {
			if i >= len(t.Shape) {
				break
			}
			switch d.Kind {
			case DimSeq:
				set.seq = t.Shape[i]
			case DimPast:
				set.past = t.Shape[i]
			}
		}
		if in.Role == RoleAttentionMask && len(t.Shape) == 2 && (t.DType.IsInt() || t.DType == graph.Bool) {
			mask = t
		}
		if in.Role == RolePositionIDs && len(t.Shape) == 2 && t.DType.IsInt() {
			v := t.Int64s()
			set.pos = make([][]int64, t.Shape[0])
			for b := range set.pos {
				set.pos[b] = slices.Clone(v[b*t.Shape[1] : (b+1)*t.Shape[1]])
			}
		}
	}
	if mask != nil {
		set.pad = padFromMask(mask, set.seq)
	}
	return set
}

// padFromMask marks the current tokens whose mask entry is 0 (the mask's
// last axis ends with the current tokens).
func padFromMask(t *kernels.Tensor, seq int) [][]bool {
	if len(t.Shape) != 2 || seq <= 0 || t.Shape[1] < seq {
		return nil
	}
	v := t.Int64s()
	rows, cols := t.Shape[0], t.Shape[1]
	pad := make([][]bool, rows)
	any := false
	for b := range pad {
		pad[b] = make([]bool, seq)
		for j := range pad[b] {
			pad[b][j] = v[b*cols+cols-seq+j] == 0
			any = any || pad[b][j]
		}
	}
	if !any {
		return nil
	}
	return pad
}

// sides lists the model/runtime runs and the pairs of them to compare.
func (c *comparison) sides(a, b *graph.Model) ([]*side, [][2]*side) {
	o := c.opts
	ag := &side{model: "A", m: a, path: o.PathA, rt: RuntimeGo}
	bg := &side{model: "B", m: b, path: o.PathB, rt: RuntimeGo}
	ao := &side{model: "A", m: a, path: o.PathA, rt: RuntimeORT}
	bo := &side{model: "B", m: b, path: o.PathB, rt: RuntimeORT}
	switch c.rep.Runtime {
	case RuntimeORT:
		ag.hidden = true // output shapes for ONNX Runtime's half outputs
		return []*side{ag, ao, bo}, [][2]*side{{ao, bo}}
	case RuntimeBoth:
		return []*side{ag, bg, ao, bo}, [][2]*side{{ag, bg}, {ao, bo}, {ag, ao}, {bg, bo}}
	}
	return []*side{ag, bg}, [][2]*side{{ag, bg}}
}

// runSides runs every set on every side, one side at a time (so that one
// model's weights are in memory at once). A set that the first side (A)
// refuses is dropped when it is optional; a side that runs no set at all
// makes the pair incomparable.
func (c *comparison) runSides(sides []*side) error {
	defer func() {
		if c.goA != nil {
			c.goA.close()
			c.goA = nil
		}
	}()
	c.total = len(sides) * len(c.sets)
	first := true
	for k, s := range sides {
		if s.hidden && !hasHalfOutputs(s.m) {
			c.total -= len(c.sets)
			continue
		}
		primary := first
		first = false
		r, err := c.open(s)
		if err != nil {
			return err
		}
		ran := 0
		var firstErr error
		var keep []*inputSet
		for i, set := range c.sets {
			if err := c.ctx.Err(); err != nil {
				r.close()
				return err
			}
			var like map[string]*kernels.Tensor
			if s.rt == RuntimeORT {
				like = c.like(sides[:k], i)
			}
			t0 := time.Now()
			var out map[string]*kernels.Tensor
			if s.model == "A" && s.rt == RuntimeGo && set.spec != nil && c.cached[set.spec.key()] != nil {
				out = c.cached[set.spec.key()]
			} else {
				c.progress(fmt.Sprintf("%s: %s", s.label(), set.name))
				out, err = runInto(r, set.inputs, like, c.spill)
				// Kept until the other sides have run: the large ones
				// wait in a file.
				out = c.spill.Outputs(out)
			}
			c.done++
			if err != nil && errors.Is(err, kernels.ErrInternal) {
				r.close()
				return &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Set: set.name, Err: err}
			}
			if primary && err != nil {
				if set.spec == nil || set.spec.required {
					r.close()
					return &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Set: set.name, Err: err}
				}
				c.rep.Skipped = append(c.rep.Skipped, Skipped{Name: set.name, Reason: fmt.Sprintf("%s (%s) refuses it: %v", s.label(), set.spec.describe(), oneLine(err))})
				continue
			}
			if primary {
				keep = append(keep, set)
			}
			if err == nil {
				ran++
			} else if firstErr == nil {
				firstErr = &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Set: set.name, Err: err}
			}
			s.outs = append(s.outs, out)
			s.errs = append(s.errs, err)
			s.seconds = append(s.seconds, time.Since(t0).Seconds())
		}
		r.close()
		if primary {
			c.sets = keep
		}
		if ran == 0 {
			if firstErr == nil {
				firstErr = &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Err: errors.New("no input set to run")}
			}
			return firstErr
		}
	}
	return nil
}

// open makes a side's runner.
func (c *comparison) open(s *side) (runner, error) {
	if s.rt == RuntimeGo {
		if s.model == "A" && c.goA != nil {
			r := c.goA
			c.goA = nil
			return r, nil
		}
		r, err := newGoRunner(s.m, c.opts.Threads, nil)
		if err != nil {
			return nil, &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Err: err}
		}
		return c.decoding(s, r), nil
	}
	path := s.path
	if path == "" {
		dir, err := os.MkdirTemp("", "onnxpe-verify-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir) // ONNX Runtime has read the file once the session exists
		path = filepath.Join(dir, "model.onnx")
		if err := s.m.Save(path, graph.SaveOptions{External: graph.KeepStorage}); err != nil {
			return nil, fmt.Errorf("verify: saving model %s for ONNX Runtime: %w", s.model, err)
		}
	}
	r, err := newORTRunner(path, s.m, c.opts.Threads)
	if err != nil {
		if errors.Is(err, ErrNoORT) {
			return nil, err
		}
		return nil, &ModelError{Model: s.model, Path: s.path, Runtime: s.rt, Err: err}
	}
	return c.decoding(s, r), nil
}

// decoding wraps B's runner when B is A with a KV cache.
func (c *comparison) decoding(s *side, r runner) runner {
	if s.model != "B" || c.link == nil {
		return r
	}
	var outs []string
	for _, v := range c.a.Graph.Outputs {
		outs = append(outs, v.Name)
	}
	return &decodeRunner{inner: r, link: c.link, an: c.an, b: c.b, outs: outs, halfORT: s.rt == RuntimeORT && hasHalfOutputs(c.b)}
}

// like returns outputs of set i from sides already run (for ONNX
// Runtime's output allocation).
func (c *comparison) like(done []*side, i int) map[string]*kernels.Tensor {
	for _, s := range done {
		if i < len(s.outs) && s.outs[i] != nil {
			return s.outs[i]
		}
	}
	if s := c.stored; s != nil && i < len(s.outs) && s.outs[i] != nil {
		return s.outs[i]
	}
	return nil
}

func hasHalfOutputs(m *graph.Model) bool {
	for _, v := range m.Graph.Outputs {
		if dt := v.Type.ElemType(); dt == graph.Float16 || dt == graph.BFloat16 {
			return true
		}
	}
	return false
}

func (c *comparison) progress(step string) {
	if c.opts.Progress != nil {
		c.opts.Progress(Progress{Done: c.done, Total: c.total, Step: step})
	}
}

// compareSides compares x (the reference) with y on every set.
func (c *comparison) compareSides(x, y *side, pairs [][2]string) {
	pairing := fmt.Sprintf("%s / %s", x.label(), y.label())
	if c.rep.Reference {
		pairing = fmt.Sprintf("%s / reference", y.label())
	}
	across := x.model == y.model && x.rt != y.rt && !c.rep.Reference
	for i, set := range c.sets {
		r := SetResult{Name: set.name, Pairing: pairing, AcrossRuntimes: across, Spec: set.spec, Inputs: c.describeInputs(set)}
		if i < len(y.seconds) {
			r.Seconds = y.seconds[i]
		}
		var errs []string
		for _, s := range []*side{x, y} {
			if i < len(s.errs) && s.errs[i] != nil {
				errs = append(errs, fmt.Sprintf("%s: %s", s.label(), oneLine(s.errs[i])))
			}
		}
		if len(errs) > 0 {
			r.Error = strings.Join(errs, "; ")
			c.rep.Sets = append(c.rep.Sets, r)
			continue
		}
		ox, oy := x.outs[i], y.outs[i]
		r.Equal = true
		for _, p := range pairs {
			ta, tb := ox[p[0]], oy[p[1]]
			if c.rep.Reference {
				ta, tb = ox[p[0]], oy[p[0]]
			}
			v := c.a.Graph.Lookup(p[0])
			var d OutputDiff
			switch {
			case ta == nil && c.rep.Reference:
				continue // the reference does not hold this output
			case ta == nil || tb == nil:
				d = OutputDiff{Name: p[0], Problem: "missing on one side"}
			default:
				pm := noPositions
				if v != nil {
					pm = c.an.positionMapFor(v, set, ta.Shape)
				}
				tol := c.opts.Policy.For(ta.DType)
				if across {
					tol = tol.AcrossRuntimes()
				}
				if c.rep.Reference {
					d = diffTensorsAs(p[0], "the reference", "A", ta, tb, tol, pm)
				} else {
					d = diffTensors(p[0], ta, tb, tol, pm)
				}
			}
			if p[1] != p[0] && !c.rep.Reference {
				d.NameB = p[1]
			}
			r.Equal = r.Equal && d.Equal
			r.Outputs = append(r.Outputs, d)
			// Pages of spilled outputs read for the diff go back.
			c.spill.Release(ta)
			c.spill.Release(tb)
		}
		c.rep.Sets = append(c.rep.Sets, r)
	}
}

func (c *comparison) describeInputs(set *inputSet) []InputDesc {
	var out []InputDesc
	for _, in := range c.an.Inputs {
		t := set.inputs[in.Name]
		if t == nil {
			continue
		}
		out = append(out, InputDesc{Name: in.Name, DType: t.DType.String(), Shape: slices.Clone(t.Shape), Role: in.Role})
	}
	return out
}

func (c *comparison) equal() bool {
	for _, s := range c.rep.Sets {
		if !s.Equal {
			return false
		}
	}
	return len(c.rep.Sets) > 0
}

// finish fills the verdict and the summary line.
func (c *comparison) finish(start time.Time) {
	rep := c.rep
	rep.Equal = c.equal()
	rep.Tolerances = map[string]Tolerance{}
	for _, s := range rep.Sets {
		for _, o := range s.Outputs {
			switch {
			case o.DType != "" && s.AcrossRuntimes:
				rep.Tolerances[o.DType+" across runtimes"] = o.Tolerance
			case o.DType != "":
				rep.Tolerances[o.DType] = o.Tolerance
			}
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Summary = summarize(rep)
	if !rep.Equal {
		// Outputs of random ops without a seed differ from run to run:
		// say so, or "not equal" reads as a fault of the rewrite.
		for _, m := range []struct {
			name string
			m    *graph.Model
		}{{"A", c.a}, {"B", c.b}} {
			if m.m == nil {
				continue
			}
			if ops := unseededRandomOps(m.m); len(ops) > 0 {
				w := fmt.Sprintf("model %s has random ops without a seed (%s): their values differ from run to run, so its outputs cannot be compared exactly", m.name, strings.Join(ops, ", "))
				rep.Warnings = append(rep.Warnings, w)
				rep.Summary += "; " + w
			}
		}
	}
}

// randomOps are the ops whose values are drawn at random (seeded by their
// seed attribute).
var randomOps = map[string]bool{"RandomNormal": true, "RandomUniform": true, "RandomNormalLike": true,
	"RandomUniformLike": true, "Multinomial": true, "Bernoulli": true}

// unseededRandomOps names the random nodes of m without a seed (at most
// three, then how many more).
func unseededRandomOps(m *graph.Model) []string {
	var ops []string
	n := 0
	m.Walk(func(nd *graph.Node) {
		if randomOps[nd.OpType] && nd.Attr("seed") == nil {
			n++
			if len(ops) < 3 {
				ops = append(ops, fmt.Sprintf("%s %q", nd.OpType, graph.ShortName(nd.Name)))
			}
		}
	})
	if n > len(ops) {
		ops = append(ops, fmt.Sprintf("%d more", n-len(ops)))
	}
	return ops
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
