package complexorder

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
)

// ComplexOrderEvidence is what the complex-order detector read.
type Evidence struct {
	// Phase names the value Sin and Cos read (position·frequency, plus a
	// phase); Positions the position operand, Frequency the per-word
	// frequencies and Amplitude the amplitude they multiply.
	Phase, Positions, Frequency, Amplitude string
	// FreqTable, PhaseTable and AmplitudeTable name the tables the
	// frequencies, phases and amplitudes are gathered from ("" when they
	// are not gathered); TokenIDs the graph input holding the word ids the
	// gathers read (through layout ops), "" when they read another value.
	FreqTable, PhaseTable, AmplitudeTable string
	TokenIDs                              string
	// Real and Imag name the real and imaginary parts: the amplitude times
	// the cos, and times the sin, of the phase.
	Real, Imag string
	// Pos are the positions of tokens 0..S-1 at probe length S.
	Pos []float64
	// Omega are the first words' frequencies, [word][dim] (at most 16
	// rows), for the report.
	Omega [][]float64
}

// ComplexOrderPass finds complex-order embeddings (Wang et al. 2020).
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "complex_order",
	Doc: `Find complex-order word embeddings: r(w)·exp(i(ω(w)·pos + θ(w))) as real and imaginary parts.

A Sin and a Cos reading the same value whose angle is the product of a
position-only value with a value that depends on the token (its
frequencies), plus maybe another token-dependent value (an initial
phase), each multiplied by a token-dependent amplitude: the real and
imaginary parts of a complex embedding whose phase turns with the
position. learned_frequency: the frequencies are a table gathered by the
token ids; learned_phase: so is the phase; the position operand
evaluated at probe lengths gives the order of the positions.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks},
	Run:      runComplexOrder,
}

func runComplexOrder(c *passes.Context) ([]*passes.Finding, error) {
	w := work.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	var out []*passes.Finding
	seen := map[*graph.Value]bool{}
	for _, g := range attn.DetectGraphsOf(w.M.Graph) {
		for _, s := range g.Nodes() {
			if s.OpType != "Sin" || !work.IsONNX(s) || seen[s.Input(0)] {
				continue
			}
			phase := s.Input(0)
			seen[phase] = true
			f, why := complexOrderAt(w, phase, s, blocks)
			if f == nil {
				if why != "" {
					c.Miss("complex_order", w.OrigName(s), why, 1)
				}
				continue
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func complexOrderAt(w *work.Work, phase *graph.Value, sinN *graph.Node, blocks []*attn.Block) (*passes.Finding, string) {
	if !w.IsAct(phase) {
		return nil, "" // a position-only angle (sinusoidal, RoPE)
	}
	var cosN *graph.Node
	for _, u := range phase.Uses() {
		if u.Node.OpType == "Cos" {
			cosN = u.Node
		}
	}
	if cosN == nil {
		return nil, "the angle has a Sin but no Cos"
	}
	// phase = pos·ω (+ θ)
	var theta *graph.Value
	prod := phase.Producer()
	nodes := []*graph.Node{sinN, cosN}
	if prod != nil && prod.OpType == "Add" && len(w.ActInputs(prod)) == 2 {
		for _, i := range []int{0, 1} {
			if m := prod.Input(i).Producer(); m != nil && m.OpType == "Mul" {
				theta = prod.Input(1 - i)
				nodes = append(nodes, prod)
				prod = m
				break
			}
		}
	}
	if prod == nil || prod.OpType != "Mul" || len(prod.Inputs()) != 2 {
		return nil, "the angle is not a product of positions and frequencies"
	}
	acts := w.ActInputs(prod)
	if len(acts) != 1 {
		return nil, "the angle is not a product of positions and frequencies"
	}
	omega, pos := prod.Input(acts[0]), prod.Input(1-acts[0])
	if w.IsConst(pos) {
		return nil, "the angle's position operand is a constant"
	}
	nodes = append(nodes, prod)
	// The amplitude: the Cos and Sin each multiply a token-dependent value.
	var amp *graph.Value
	var ampNodes []*graph.Node
	var parts [2]*graph.Value // real, imaginary
	for i, n := range []*graph.Node{cosN, sinN} {
		for _, u := range n.Output(0).Uses() {
			m := u.Node
			if m.OpType == "Mul" && len(m.Inputs()) == 2 {
				other := m.Input(1 - u.Index)
				if w.IsAct(other) {
					amp = other
					ampNodes = append(ampNodes, m)
					parts[i] = m.Output(0)
				}
			}
		}
	}
	if len(ampNodes) < 2 {
		return nil, "cos and sin of the phase are not both multiplied by an amplitude"
	}
	nodes = append(nodes, ampNodes...)
	// The positions, as the model counts them. Batch and sequence both
	// take S: a [sequence, batch] input (torchtext's layout) leads with the
	// sequence, which the probe's binding would otherwise read as the batch.
	const S = 8
	pr := probe.NewProbe(w, S, S, 0)
	pt, err := pr.Value(pos)
	if err != nil {
		return nil, "the positions could not be evaluated: " + err.Error()
	}
	pv := pt.Float64s()
	if len(pv) != S {
		return nil, fmt.Sprintf("the position operand has %d values at length %d, not one per token", len(pv), S)
	}
	params := &Params{}
	switch {
	case stepsBy(pv, 1):
		params.PositionOrder = "ascending"
	case stepsBy(pv, -1):
		params.PositionOrder = "descending"
	default:
		return nil, fmt.Sprintf("the positions %v do not step by one", pv)
	}
	if d := w.Shape(omega).Last(); d.Known() {
		params.Dim = int(d)
	}
	ev := &Evidence{Phase: w.Name(phase), Positions: w.Name(pos), Frequency: w.Name(omega), Amplitude: w.Name(amp), Pos: pv}
	if parts[0] != nil && parts[1] != nil {
		ev.Real, ev.Imag = w.Name(parts[0]), w.Name(parts[1])
	}
	if g := tokenTable(w, omega); g != nil {
		params.LearnedFrequency = true
		ev.FreqTable = w.Name(g.Input(0))
		ev.Omega = tableHead(w, g.Input(0), 16)
		ev.TokenIDs = idsInput(w, g.Input(1))
		nodes = append(nodes, g)
	}
	if g := tokenTable(w, amp); g != nil {
		ev.AmplitudeTable = w.Name(g.Input(0))
		if ids := idsInput(w, g.Input(1)); ids != ev.TokenIDs {
			ev.TokenIDs = ""
		}
	}
	if theta != nil {
		if g := tokenTable(w, theta); g != nil {
			params.LearnedPhase = true
			ev.PhaseTable = w.Name(g.Input(0))
			nodes = append(nodes, g)
		}
	}
	nodes = append(nodes, w.Cone(pos)...)
	reached := map[int]bool{}
	for _, n := range ampNodes {
		for _, l := range absolute.ReachedBlocks(w, n.Output(0), blocks) {
			reached[l] = true
		}
	}
	var layers []int
	for l := range reached {
		layers = append(layers, l)
	}
	f := &passes.Finding{Scheme: Name, Layers: passes.SortedUnique(layers), Params: params, Evidence: ev}
	f.Nodes = w.OrigNames(nodes)
	return f, ""
}

func stepsBy(v []float64, d float64) bool {
	for i := 1; i < len(v); i++ {
		if math.Abs(v[i]-v[i-1]-d) > 1e-6 {
			return false
		}
	}
	return len(v) > 1
}

// tokenTable is the Gather reading a constant table by token ids that v
// comes from (through layout ops), or nil.
func tokenTable(w *work.Work, v *graph.Value) *graph.Node {
	for steps := 0; steps < 8 && v != nil; steps++ {
		n := v.Producer()
		if n == nil {
			return nil
		}
		if n.OpType == "Gather" && w.IsConst(n.Input(0)) && w.IsAct(n.Input(1)) {
			return n
		}
		if !work.LayoutOps[n.OpType] && n.OpType != "Transpose" {
			return nil
		}
		v = n.Input(0)
	}
	return nil
}

// idsInput is the graph input v is read from through layout ops (the
// word ids a table gather reads), or "".
func idsInput(w *work.Work, v *graph.Value) string {
	for steps := 0; steps < 8 && v != nil; steps++ {
		n := v.Producer()
		if n == nil {
			if v.IsGraphInput() {
				return w.Name(v)
			}
			return ""
		}
		if !work.LayoutOps[n.OpType] && n.OpType != "Transpose" && n.OpType != "Cast" {
			return ""
		}
		v = n.Input(0)
	}
	return ""
}

// tableHead is the first rows of a constant 2-D table, [row][col].
func tableHead(w *work.Work, v *graph.Value, rows int) [][]float64 {
	t := w.Const(v)
	if t == nil || t.Rank() != 2 {
		return nil
	}
	d := t.Shape[1]
	x := t.Float64s()
	var out [][]float64
	for r := 0; r < min(rows, t.Shape[0]); r++ {
		out = append(out, append([]float64(nil), x[r*d:(r+1)*d]...))
	}
	return out
}
