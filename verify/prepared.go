package verify

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Prepared is a model analysed once, with its onnxpe session open, for a
// command that compares it several times (extend's checks): Compare and
// CompareReference given Options.Prepared for model A use its analysis
// (the sweep planned once, with the hints Prepare was given) and its
// session instead of analysing A and opening a session for every call.
// Close it when done.
type Prepared struct {
	m       *graph.Model
	an      *Analysis
	r       *goRunner
	p       *planner
	seed    uint64
	threads int
}

// Prepare analyses m as Compare does for model A (running it on probe
// inputs synthesised with seed) and keeps its session.
func Prepare(m *graph.Model, hints Hints, seed uint64, threads int) (*Prepared, error) {
	a := analyzeGraph(m)
	r, err := newGoRunner(m, threads, nil)
	if err != nil {
		return nil, err
	}
	p := &planner{a: a, opts: &Options{Hints: hints, Threads: threads}, cached: map[string]map[string]*kernels.Tensor{}, eval: r.s.Eval, spill: kernels.NewSpill()}
	p.run = func(s SetSpec) (map[string]*kernels.Tensor, error) {
		set, err := a.synthesize(s, seed)
		if err != nil {
			return nil, err
		}
		return runInto(r, set.inputs, nil, p.spill)
	}
	if err := p.analyze(); err != nil {
		r.close()
		p.spill.Close()
		return nil, err
	}
	return &Prepared{m: m, an: a, r: r, p: p, seed: seed, threads: threads}, nil
}

// Model is the prepared model.
func (p *Prepared) Model() *graph.Model { return p.m }

// Analysis is what the analysis found.
func (p *Prepared) Analysis() *Analysis { return p.an }

// Synthesize is Synthesize of the prepared model, without analysing it
// again.
func (p *Prepared) Synthesize(specs []SetSpec, seed uint64) ([]NamedInputs, error) {
	var out []NamedInputs
	for _, s := range specs {
		if s.Past > 0 && !p.an.HasCache {
			continue
		}
		set, err := p.an.synthesize(s, seed)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		out = append(out, NamedInputs{Name: s.Name, Inputs: set.inputs})
	}
	return out, nil
}

// Run runs the prepared model on inputs with its session.
func (p *Prepared) Run(inputs map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	return p.r.run(inputs, nil)
}

// RunInto is Run with the large outputs written into sp as they are made
// (kernels.Session.RunInto): they are sp's, valid until sp.Close.
func (p *Prepared) RunInto(inputs map[string]*kernels.Tensor, sp *kernels.Spill) (map[string]*kernels.Tensor, error) {
	return runInto(p.r, inputs, nil, sp)
}

// Close releases the session.
func (p *Prepared) Close() {
	if p.r != nil {
		p.r.close()
		p.r = nil
	}
	if p.p != nil {
		p.p.cached = nil
		p.p.spill.Close()
		p.p.spill = nil
	}
}

// kept is a runner a comparison borrows: closing it leaves it open.
type kept struct{ runner }

func (kept) close() {}
