package rope

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
	"strings"
)

// RoPEEvidence is what the RoPE detector measured, per finding.
type Evidence struct {
	// Pairs are the rotary pairs (dimension indexes of the head) in
	// frequency order.
	Pairs [][2]int
	// InvFreq are the measured frequencies (radians per position) of the
	// pairs; InvFreqLong those measured beyond the original length for
	// rules that switch (longrope), else nil.
	InvFreq, InvFreqLong []float64
	// Amplitude multiplies cos and sin (1 unless YaRN/LongRoPE scale them).
	Amplitude float64
	// Synthetic is true when cos/sin come from graph inputs (the values
	// are not in the file).
	Synthetic bool
	// Table names the stored cos/sin (or sin|cos) table, when there is one.
	Table string
	// Blocks are the rotations found, per block and side; Loose those of
	// tensors that are not a block's q or k (a fragment without
	// attention).
	Blocks []Block
	Loose  []Side
	// CosSinNodes compute the values that enter the rotations (positions,
	// frequencies, cos and sin).
	CosSinNodes []string
	// Cos and Sin are what the rotation applies at consecutive positions,
	// as one probe evaluated it: [row][pair], the amplitude included, row
	// i at position Start+i (Start -1 when the angles did not tell the
	// first position), at most 64 rows. Nil when the probe failed or the
	// frequencies are graph inputs (Synthetic).
	Start    int
	Cos, Sin [][]float64
	// Axis is the axis of q (as the rotation reads it) along which the
	// positions run; the others but the last are batch and heads.
	Axis int
	// Positions says where the rotation reads the positions (nil when the
	// cos/sin depend on more than the positions: frequencies given as
	// inputs, dynamic rules; PositionsWhy says why).
	Positions    *probe.Positions
	PositionsWhy string
	// Angles is the exact arithmetic of the cos and sin when the graph
	// computes them (positions times frequencies, sin and cos, a scale),
	// Stored the tables holding them when it reads them from stored
	// caches; both nil when neither could be confirmed on the measured
	// values (ExactWhy says why). Codegen reproduces them bit for bit.
	Angles   *probe.Angles
	Stored   *StoredCosSin
	ExactWhy string
	// PairAxis is, for a 2-D rotation over a patch grid, the axis turning
	// each pair (0: the column, 1: the row); GridOffset the tokens before
	// the grid (not rotated).
	PairAxis   []int
	GridOffset int
	// Streams names the positions input of a multimodal rotation (M-RoPE),
	// read as [streams, batch, seq], and PairStream the stream turning
	// each pair (in the order of Pairs).
	Streams    string
	PairStream []int
}

// RoPEBlock is one block's rotations of q and k.
type Block struct {
	Layer int
	Q, K  Side
	// Op names the fused attention op that rotates q and k inside itself
	// (GroupQueryAttention's do_rotary), when no node of the graph does.
	Op string
}

// RoPESide is the rotation of one operand: the original values it reads
// and writes, the values that enter it besides (cos, sin) and its nodes.
type Side struct {
	In, Out string
	Pos     []string
	Nodes   []string
	// Form names how the rotation is written (rotate_half,
	// rotate_every_two, complex_pairs; "" for another form), and
	// RotateNodes the original nodes of that sub-pattern.
	Form        string
	RotateNodes []string

	side *attn.Side // in the working copy
}

// RoPE finds rotary position embeddings in unfused form.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "rope",
	Doc: `Find rotary position embeddings (RoPE) on q and k.

A side whose region rotates pairs of head dimensions by angles that grow
linearly with the position is RoPE. The region is probed with unit
vectors: which dimensions pair up gives the layout (half_split or
interleaved) and the rotary dim; the angles over consecutive positions
give the frequency of every pair and the amplitude. The base and the
scaling rule (none, linear, ntk, llama3, yarn, unknown) are fitted from
the frequencies; a second probe at other positions shows whether they
depend on the sequence length (dynamic NTK). Frequencies that come from
graph inputs are reported as null.

Rotations fused ops carry are reported with fused: true, after the
unfused ones: RotaryEmbedding of both domains on a block's q and k, and
the do_rotary of the fused attention ops, their sizes read by the ops'
contracts and their caches fitted as unfused cos/sin are.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, attn.Sides},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		out, err := runRoPE(c)
		if err != nil {
			return nil, err
		}
		return append(out.([]*passes.Finding), fusedRoPE(c)...), nil
	},
}

type ropeMeasure struct {
	rot *rotation
	fit ropeFit
}

// hit is one rotation found: of a block's q and k (ev.Layer the block),
// or of a tensor that is not a block's q or k (loose, reaching layers).
type hit struct {
	layers []int
	params *Params
	ev     *Block
	loose  *Side
	m      *ropeMeasure
	side   *attn.Side // the rotation measured (q's for a block)
	nodes  []*graph.Node
	pos    []*graph.Value
	notes  []string
}

func runRoPE(c *passes.Context) (any, error) {
	w := work.Of(c)
	blocks := passes.Result(c, attn.Blocks)
	sides := passes.Result(c, attn.Sides)
	cache := map[string]*ropeMeasure{}
	hits := blockRotations(c, w, blocks, sides, cache)
	hits = append(hits, looseRotations(c, w, blocks, sides, cache)...)
	return groupHits(w, hits), nil
}

// blockRotations measures the q and k sides of every block.
func blockRotations(c *passes.Context, w *work.Work, blocks []*attn.Block, sides map[*attn.Block]*attn.BlockSides, cache map[string]*ropeMeasure) []hit {
	var hits []hit
	for _, b := range blocks {
		bs := sides[b]
		if bs == nil || bs.Q == nil || len(bs.Q.Nodes) == 0 || len(bs.Q.Pos) == 0 {
			continue
		}
		at := w.OrigName(b.Node())
		if n := fusedIn(bs.Q.Nodes); n != nil {
			c.Miss("rope", at, fmt.Sprintf("q is rotated by the fused op %v (left to the fused detectors)", n), 1)
			continue
		}
		mq, why := measureCached(w, cache, bs.Q)
		if mq == nil {
			c.Miss("rope", at, "q: "+why, 2)
			continue
		}
		var mk *ropeMeasure
		if bs.K != nil && len(bs.K.Nodes) > 0 {
			mk, why = measureCached(w, cache, bs.K)
			if mk == nil {
				c.Miss("rope", at, "k: "+why, 3)
			}
		}
		p, notes := ropeParams(w, bs, mq, mk)
		ev := Block{Layer: b.Index, Q: sideEvidence(w, bs.Q)}
		nodes := append([]*graph.Node{}, bs.Q.Nodes...)
		pos := slices.Clone(bs.Q.Pos)
		if bs.K != nil && mk != nil {
			ev.K = sideEvidence(w, bs.K)
			nodes = append(nodes, bs.K.Nodes...)
		}
		if bs.K != nil {
			pos = append(pos, bs.K.Pos...)
		}
		hits = append(hits, hit{layers: []int{b.Index}, params: p, ev: &ev, m: mq, side: bs.Q, nodes: nodes, pos: pos, notes: notes})
	}
	return hits
}

// groupHits makes one finding per distinct parameter set (each set printed
// once, not once per layer and finding).
func groupHits(w *work.Work, hits []hit) []*passes.Finding {
	var out []*passes.Finding
	var keys []string
	pos := map[*passes.Finding][]*graph.Value{}
	for _, h := range hits {
		var f *passes.Finding
		key := passes.ParamsKey(h.params)
		for i, g := range out {
			if keys[i] == key {
				f = g
				break
			}
		}
		if f == nil {
			keys = append(keys, key)
			f = newFinding(w, h)
			out = append(out, f)
		}
		ev := f.Evidence.(*Evidence)
		if h.ev != nil {
			ev.Blocks = append(ev.Blocks, *h.ev)
		}
		if h.loose != nil {
			ev.Loose = append(ev.Loose, *h.loose)
		}
		f.Layers = append(f.Layers, h.layers...)
		for _, n := range h.notes {
			if !slices.Contains(f.Notes, n) {
				f.Notes = append(f.Notes, n)
			}
		}
		f.Nodes = append(f.Nodes, w.OrigNames(h.nodes)...)
		pos[f] = append(pos[f], h.pos...)
	}
	for _, f := range out {
		cs := w.OrigNames(cosSinNodes(w, pos[f]))
		f.Evidence.(*Evidence).CosSinNodes = cs
		f.Nodes = w.SortOrig(append(f.Nodes, cs...))
		if f.Layers == nil {
			f.Layers = []int{}
		}
	}
	return out
}

// cosSinNodes are the nodes computing the values pos that enter the
// rotations: their cone, and the nodes normalisation folded into them or
// into the constants the cone reads (the cos/sin of a fixed length or
// grid, frequencies expanded to the batch), with the Shape nodes those
// read. Whether a part of the computation was folded (a size the shapes
// fix) does not change the list.
func cosSinNodes(w *work.Work, pos []*graph.Value) []*graph.Node {
	cone := w.Cone(pos...)
	var folded []*graph.Node
	for _, v := range pos {
		if w.IsConst(v) {
			folded = append(folded, w.FoldedNodes(v)...)
		}
	}
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in != nil && w.IsConst(in) {
				folded = append(folded, w.FoldedNodes(in)...)
			}
		}
	}
	for _, n := range folded {
		for _, in := range n.Inputs() {
			if in == nil || w.FoldedFrom(in) != nil {
				continue
			}
			if p := in.Producer(); p != nil && (p.OpType == "Shape" || p.OpType == "Size") {
				folded = append(folded, p)
			}
		}
	}
	return append(cone, folded...)
}

// newFinding is the finding of a hit's parameter set, with the evidence
// of its rotation.
func newFinding(w *work.Work, h hit) *passes.Finding {
	r := h.m.rot
	ev := &Evidence{Pairs: r.pairs, InvFreq: r.omega, InvFreqLong: r.omegaLong, Amplitude: r.amp,
		Synthetic: r.synthetic, Table: r.table, Axis: r.posAxis}
	if ax := r.axial; ax != nil {
		ev.PairAxis, ev.GridOffset = ax.Axis, ax.Offset
	}
	if r.streamsIn != nil {
		ev.Streams, ev.PairStream = w.OrigValue(r.streamsIn), r.pairStream
	}
	ev.Start, ev.Cos, ev.Sin = cosSinRows(w, h.side, r)
	ev.Positions, ev.PositionsWhy = ropePositions(w, h.side, r)
	ev.Angles, ev.Stored, ev.ExactWhy = ropeExact(w, h.side, r, ev)
	return &passes.Finding{Scheme: Name, Params: h.params, Evidence: ev}
}

func sideEvidence(w *work.Work, s *attn.Side) Side {
	r := Side{In: w.OrigValue(s.In), Out: w.OrigValue(s.Out), Nodes: w.OrigNames(s.Nodes), side: s}
	form, nodes := rotationForm(w, s)
	r.Form, r.RotateNodes = form, w.OrigNames(nodes)
	for _, p := range s.Pos {
		r.Pos = append(r.Pos, w.OrigValue(p))
	}
	return r
}

func measureCached(w *work.Work, cache map[string]*ropeMeasure, s *attn.Side) (*ropeMeasure, string) {
	// Sides sharing their cos/sin values and head shape measure the same.
	var key strings.Builder
	for _, p := range s.Pos {
		fmt.Fprintf(&key, "%p,", p)
	}
	fmt.Fprintf(&key, "%s|%d", w.ShapeString(w.Shape(s.In)), len(s.Nodes))
	if m, ok := cache[key.String()]; ok {
		return m, ""
	}
	rot, why := measureRotation(w, s)
	if rot == nil {
		return nil, why
	}
	m := &ropeMeasure{rot: rot}
	if rot.axial != nil {
		m.fit = rot.fitAxial()
	} else if !rot.synthetic {
		m.fit = rot.fitFrequencies()
		if rot.dynamic != nil {
			angErr := rot.angErr()
			m.fit = fitDynamic(w, rot, angErr, max(1e-6, 2*angErr))
		}
	}
	cache[key.String()] = m
	return m, ""
}

// fitFrequencies fits the base and scaling rule of the measured
// frequencies (weighted by their measurement error, which the noise of the
// angles and the type they were computed in decide).
func (r *rotation) fitFrequencies() ropeFit {
	angErr := r.angErr()
	tol := max(1e-6, 2*angErr)
	return fitRoPE(r.omega, probe.OmegaSigma(r.omega, angErr, r.seq, r.seq, relEps(r.half)), r.rotaryDim, r.amp, tol, r.tableRows)
}

// ropeParams assembles the params of one block.
func ropeParams(w *work.Work, bs *attn.BlockSides, mq, mk *ropeMeasure) (*Params, []string) {
	r := mq.rot
	p := &Params{Layout: r.layout, HeadDim: r.headDim, RotaryDim: r.rotaryDim, QKNorm: bs.Q.Norm}
	var notes []string
	if r.heads > 0 {
		p.NumHeads = passes.Ptr(r.heads)
	}
	if mk != nil && mk.rot.heads > 0 {
		p.NumKVHeads = passes.Ptr(mk.rot.heads)
	} else if p.NumHeads != nil {
		p.NumKVHeads = passes.Ptr(*p.NumHeads)
	}
	if r.tableRows > 0 {
		p.MaxPositions = passes.Ptr(r.tableRows)
	}
	if r.pastLength {
		p.PositionSource = "past_length"
	}
	p.MultimodalSections = r.sections
	if r.axial != nil {
		p.Axes = 2
		if !r.axial.Open {
			p.Grid = []int{r.axial.Rows, r.axial.Cols}
		}
		if r.axial.OpenWhy != "" {
			notes = append(notes, r.axial.OpenWhy)
		}
	}
	if r.synthetic {
		notes = append(notes, "base, scaling and factor: the frequencies (or the cos/sin caches) are not in the file (graph inputs, or an absent external-data file)")
		if r.tableRows == 0 {
			notes = append(notes, "max_positions: no stored cos/sin table")
		}
		return p, notes
	}
	return p, append(notes, setFit(p, r, mq.fit)...)
}

// setFit sets the params the frequencies of r decide (base, scaling and
// the rule's parameters) from their fit f, and returns the notes of the
// fit. The fused detectors use it for frequencies read from cos/sin
// caches.
func setFit(p *Params, r *rotation, f ropeFit) []string {
	var notes []string
	if f.Scaling == "unknown" {
		p.Scaling = passes.Ptr("unknown")
		p.Frequencies = r.omega
		if math.Abs(r.amp-1) > 1e-5 {
			p.AttentionFactor = passes.Ptr(snapF32(r.amp))
		}
		return append(append(notes, f.Notes...), unknownRuleNote(r.omega, p.RotaryDim))
	}
	if !math.IsNaN(f.Base) {
		p.Base = passes.Ptr(f.Base)
	}
	p.Scaling = passes.Ptr(f.Scaling)
	if !math.IsNaN(f.Factor) {
		p.Factor = passes.Ptr(f.Factor)
	}
	p.ShortFactor, p.LongFactor = f.Short, f.Long
	if f.Scaling == "longrope" && p.Factor != nil && f.Orig != nil && p.MaxPositions == nil {
		// The length the factor extends the original to.
		p.MaxPositions = passes.Ptr(int(math.Round(*p.Factor * float64(*f.Orig))))
	}
	p.OriginalMaxPositions = f.Orig
	p.LowFreqFactor, p.HighFreqFactor = f.Low, f.High
	p.llama3 = f.Llama3
	p.BetaFast, p.BetaSlow = f.BetaFast, f.BetaSlow
	p.AttentionFactor = f.AttnF
	p.CorrectionRange = f.Range
	if f.Scaling == "ntk" {
		p.Dynamic = passes.Ptr(f.Dynamic)
	}
	notes = append(notes, f.Notes...)
	return notes
}

// unknownRuleNote says why a rotation whose frequencies fit no rule has
// its base and factor null: per-pair factors (LongRoPE's lists, frozen at
// one length) make them those of any base, and the best single base
// misses them by the amount it says.
func unknownRuleNote(omega []float64, rd int) string {
	const why = "scaling: the measured frequencies follow no known rule (none, linear, ntk, llama3, yarn; no switch to a second set as LongRoPE's)"
	const null = "any base θ with per-pair factors θ^(-2k/d)/ω_k reproduces them, so the graph does not fix a base or a factor: base and factor null; see frequencies"
	if len(omega) < 2 || rd < 2 {
		return why + "; " + null
	}
	sigma := make([]float64, len(omega))
	for k := range sigma {
		sigma[k] = 1
	}
	base, f, miss := probe.PlainFit(omega, sigma, rd)
	return fmt.Sprintf("%s: the closest single base, %.6g with factor %.4g, is off one frequency by %.2g%%; %s", why, base, f, 100*miss, null)
}

// fusedIn returns the first node of another domain than ONNX's among
// nodes (a fused or custom op, which the fused detectors read from its
// attributes and inputs).
func fusedIn(nodes []*graph.Node) *graph.Node {
	for _, n := range nodes {
		if !work.IsONNX(n) || n.OpType == "RotaryEmbedding" {
			return n
		}
	}
	return nil
}

// MergeEvidence takes the blocks and cos/sin nodes of another finding's
// evidence.
func (ev *Evidence) MergeEvidence(from any, order func([]string) []string) {
	if fe, ok := from.(*Evidence); ok {
		ev.Blocks = append(ev.Blocks, fe.Blocks...)
		ev.CosSinNodes = order(append(ev.CosSinNodes, fe.CosSinNodes...))
	}
}
