package relsin

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
	"slices"
)

// Evidence is what the relative-sinusoid detector measured.
type Evidence struct {
	// Angles names the value holding distance·frequency (what Sin and Cos
	// read); Table the sinusoid of the distances (the value the position
	// projection reads), when one value holds it.
	Angles, Table string
	// S is the probe length of Distances and Sample.
	S int
	// Distances are the relative distances of the table's rows at probe
	// length S (queries and keys S long).
	Distances []float64
	// Omega are the frequencies, per sin/cos column pair.
	Omega []float64
	// Sample is the sinusoid table at probe length S, [row][dim] (nil when
	// no one value holds it), for the report's heat map.
	Sample [][]float64
	// Blocks are the layers' position terms.
	Blocks []RelSinBlock
	// Distance names the 1-D value of distances (clamp included) the
	// angles multiply by the frequencies; Pairs are the (sin, cos)
	// columns of Table per frequency, in the order of Omega; Exact is the
	// arithmetic of the table (distance times the frequencies the graph
	// holds, sin and cos, in the graph's element types), confirmed on
	// Sample at Distances. Nil when it could not be read (ExactWhy).
	Distance string
	Pairs    [][2]int
	Exact    *probe.Angles
	ExactWhy string
	// Stored names the constant holding the sinusoid when the graph reads
	// it at fixed distances (a fixed-size export, ONNX Runtime's constant
	// folding): its rows are Sample, at Distances, for keys S long. Such
	// a finding is not rewritten, extended or generated.
	Stored string
}

// RelSinBlock is one layer's position term.
type RelSinBlock struct {
	Layer int
	// Prod is the product of the content with the projected sinusoid;
	// Content and Pos its operands; U and V the global biases added to q
	// for the content and the position scores ("" when absent).
	Prod, Content, Pos string
	U, V               string
	// Shift are the nodes aligning the position scores to key - query.
	Shift []string
}

// RelativeSinusoidalPass finds Transformer-XL's and XLNet's relative
// attention.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "relative_sinusoidal",
	Doc: `Find relative attention over a sinusoid of relative distances (Transformer-XL, XLNet).

A block's scores hold, besides q·k, a term q'·R: q (plus a learned
per-head bias v) times a projection of sin and cos of distance·frequency,
aligned to key - query by a relative shift (pad, reshape and slice, or
reshape, slice and gather). Evaluating the angles at probe lengths gives
the distances of the rows (klen-1 .. 0 is Transformer-XL's, klen ..
-qlen+1 XLNet's), the frequencies (dim and base, fitted as
base^(-2i/dim)) and the distance where the rows stop growing (clamp_len).
q plus a bias in both the content and the position scores are the global
biases u and v.

A sinusoid stored as a constant the layers project (an export at fixed
sizes, ONNX Runtime's constant folding: no Sin or Cos in the graph) is
read from its rows: sin/cos pairs with angles linear in the distance
(layout, frequencies and base fitted as a stored absolute sinusoid), each
row at the distance its slowest pair's phase gives; those distances, for
the queries and keys the scores' shape fixes, give the variant and
clamp_len. A clamp the stored distances do not reach is null with a
note. A constant holding a row per query and key (its values change
along two axes) whose rows depend on key - query alone and stop changing
beyond some distance is a clipped relative embedding stored whole
(Shaw's, as Nezha's), not a sinusoid giving every distance its own row,
and gives no finding.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks},
	Run:      runRelSin,
}

func runRelSin(c *passes.Context) ([]*passes.Finding, error) {
	w := work.Of(c)
	var out []*passes.Finding
	for _, b := range passes.Result(c, attn.Blocks) {
		for _, t := range attn.ScoreTerms(w, b) {
			f, why := relSinAt(w, b, t)
			if f == nil {
				if why != "" {
					c.Miss("relative_sinusoidal", w.OrigName(t.Prod), why, 1)
				}
				continue
			}
			out = w.MergeFinding(out, f, nil)
		}
	}
	return out, nil
}

// angleSource evaluates, at probe length S, the angles distance·frequency
// of a relative sinusoid as [row][frequency] (the value Sin and Cos read,
// or the angles recovered from a table of [sin | cos] rows).
type angleSource func(S int) ([][]float64, string)

// valueAngles is the angle source of a value the graph computes.
func valueAngles(w *work.Work, angles *graph.Value) angleSource {
	return func(S int) ([][]float64, string) {
		p := probe.NewProbe(w, 1, S, 0)
		t, err := p.Value(angles)
		if err != nil {
			return nil, "the angles could not be evaluated: " + err.Error()
		}
		if p.Synthetic(angles) {
			return nil, "the angles come from parameters given as inputs"
		}
		if t.Rank() < 2 {
			return nil, "the angles are not a table"
		}
		k := t.Shape[t.Rank()-1]
		v := t.Float64s()
		rows := make([][]float64, len(v)/k)
		for r := range rows {
			rows[r] = v[r*k : (r+1)*k]
		}
		return rows, ""
	}
}

// tableAngles is the angle source of a [sin | cos] table value: the
// angle of every (sin, cos) column pair, unwrapped along the distances
// (consecutive rows one distance apart, the smallest frequency turning
// less than π over them).
func tableAngles(w *work.Work, table *graph.Value) angleSource {
	return func(S int) ([][]float64, string) {
		p := probe.NewProbe(w, 1, S, 0)
		t, err := p.Value(table)
		if err != nil {
			return nil, "the sinusoid table could not be evaluated: " + err.Error()
		}
		if t.Rank() < 2 || t.Shape[t.Rank()-1]%2 != 0 {
			return nil, "the sinusoid is not a table of sin and cos columns"
		}
		d := t.Shape[t.Rank()-1]
		k := d / 2
		v := t.Float64s()
		n := len(v) / d
		if n < 2 {
			return nil, "the sinusoid has fewer than 2 rows"
		}
		raw := make([][]float64, n)
		for r := range raw {
			raw[r] = make([]float64, k)
			for j := 0; j < k; j++ {
				raw[r][j] = math.Atan2(v[r*d+j], v[r*d+k+j])
			}
		}
		// Frequencies from the first two rows that differ (clamped rows
		// repeat); the distance of every row from the smallest frequency;
		// each angle unwrapped to distance·ω.
		r0 := 0
		for r0+2 < n && slices.Equal(raw[r0], raw[r0+1]) {
			r0++
		}
		om := make([]float64, k)
		jmin := 0
		for j := range om {
			om[j] = math.Abs(math.Remainder(raw[r0+1][j]-raw[r0][j], 2*math.Pi))
			if om[j] < om[jmin] {
				jmin = j
			}
		}
		if om[jmin] == 0 {
			return nil, "the sinusoid's rows do not change"
		}
		rows := make([][]float64, n)
		for r := range rows {
			pos := math.Round(raw[r][jmin] / om[jmin])
			rows[r] = make([]float64, k)
			for j := range rows[r] {
				want := pos * om[j]
				rows[r][j] = raw[r][j] + 2*math.Pi*math.Round((want-raw[r][j])/(2*math.Pi))
			}
		}
		return rows, ""
	}
}

// distanceAngles evaluates the angles at probe length S as [row][frequency]
// and reads the distance of every row and the frequencies, assuming
// consecutive rows one distance apart (before any clamp).
func distanceAngles(w *work.Work, src angleSource, S int) (pos, omega []float64, rows [][]float64, why string) {
	rows, why = src(S)
	if rows == nil {
		return nil, nil, nil, why
	}
	n, k := len(rows), len(rows[0])
	if n < 2 || k < 1 {
		return nil, nil, nil, "the angles have fewer than 2 rows"
	}
	omega = make([]float64, k)
	for j := range omega {
		omega[j] = math.Abs(rows[0][j] - rows[1][j])
		if omega[j] == 0 {
			return nil, nil, nil, "the angles do not change from row to row"
		}
	}
	jm := 0
	for j := range omega {
		if omega[j] > omega[jm] {
			jm = j
		}
	}
	pos = make([]float64, n)
	for r := range rows {
		x := rows[r][jm] / omega[jm]
		pos[r] = math.Round(x)
		if math.Abs(x-pos[r]) > 1e-3 {
			return nil, nil, nil, fmt.Sprintf("row %d is not at a whole distance (%g)", r, x)
		}
		for j := range omega {
			if math.Abs(rows[r][j]-pos[r]*omega[j]) > 1e-5*math.Max(1, math.Abs(rows[r][j])) {
				return nil, nil, nil, fmt.Sprintf("the angles of row %d are not distance·frequency", r)
			}
		}
	}
	return pos, omega, rows, ""
}

func relSinAt(w *work.Work, b *attn.Block, t attn.ScoreTerm) (*passes.Finding, string) {
	cone := w.Cone(t.Pos)
	var src angleSource
	angles, sinN, cosN := probe.SinCosOf(cone)
	var table *graph.Value
	if angles != nil {
		src = valueAngles(w, angles)
		table = sinCosTable(w, cone, sinN, cosN)
	} else if table = distanceTable(w, cone); table != nil {
		src = tableAngles(w, table) // stored, gathered by distance (onnxpe rewrite's form)
	} else {
		return storedAt(w, b, t, cone) // stored, read at fixed distances, or not a sinusoid
	}
	const S = 4
	pos, omega, _, why := distanceAngles(w, src, S)
	if pos == nil {
		return nil, why
	}
	refineOmega(w, src, omega)
	params := &Params{Dim: 2 * len(omega)}
	var notes []string
	first, last := pos[0], pos[len(pos)-1]
	expect := func(S int) (float64, float64) { return float64(S - 1), 0 }
	switch {
	case len(pos) == S && first == S-1 && last == 0:
		params.Variant = "transfo_xl"
	case len(pos) == 2*S && first == S && last == -(S-1):
		params.Variant = "xlnet"
		expect = func(S int) (float64, float64) { return float64(S), float64(-(S - 1)) }
	default:
		notes = append(notes, fmt.Sprintf("variant: at length %d the rows hold distances %g .. %g, neither klen-1 .. 0 nor klen .. -qlen+1", S, first, last))
	}
	sigma := probe.OmegaSigma(omega, 2e-7, 8, 8, 6e-8)
	if base, f, resid := probe.PlainFit(omega, sigma, params.Dim); resid < 8 && math.Abs(f-1) < 1e-4 {
		params.Base = passes.Ptr(probe.Snap(base, 1e-5))
	} else {
		notes = append(notes, "base: the frequencies are not base^(-2i/dim)")
	}
	if params.Variant != "" {
		params.ClampLen = computedClamp(w, src, omega, expect)
	}
	ev, nodes := blockTerm(w, b, t, params, &notes)
	nodes = append(nodes, cone...)
	rev := &Evidence{S: 32, Omega: omega, Blocks: []RelSinBlock{ev}}
	if angles != nil {
		rev.Angles = w.Name(angles)
	}
	rev.Distances = distancesAt(w, src, 32, omega)
	if table != nil {
		rev.Table = w.Name(table)
		if rows, _ := absolute.TableRows(w, probe.NewProbe(w, 1, 32, 0), table); rows != nil {
			rev.Sample = rows
		}
	}
	if angles != nil && table != nil && rev.Sample != nil {
		rev.Exact, rev.Pairs, rev.ExactWhy = relSinExact(w, angles, table, rev)
		if d := attn.DistanceOperand(w, angles); d != nil {
			rev.Distance = w.Name(d)
		}
	} else {
		rev.ExactWhy = "no one value computes the sinusoid from its angles (a stored table, or sin and cos not joined)"
	}
	f := &passes.Finding{Scheme: Name, Layers: []int{b.Index}, Params: params, Notes: notes, Evidence: rev}
	f.Nodes = w.OrigNames(nodes)
	return f, ""
}

// refineOmega measures the frequencies again over a longer span (still
// below any clamp the distances show).
func refineOmega(w *work.Work, src angleSource, omega []float64) {
	p8, _, rows8, _ := distanceAngles(w, src, 8)
	if p8 == nil || len(rows8[0]) != len(omega) {
		return
	}
	for r := 1; r < len(p8); r++ {
		if math.Abs(p8[r]-p8[r-1]) != 1 {
			return
		}
	}
	n := float64(len(p8) - 1)
	for j := range omega {
		omega[j] = math.Abs(rows8[0][j]-rows8[len(rows8)-1][j]) / n
	}
}

// computedClamp is clamp_len of computed angles: the longest distance the
// rows reach when longer sequences would need more (nil: not clamped up
// to length 16384). expect gives the distances a length needs.
func computedClamp(w *work.Work, src angleSource, omega []float64, expect func(S int) (float64, float64)) *int {
	for L := 16; L <= 1<<14; L *= 4 {
		p := distancesAt(w, src, L, omega)
		if p == nil {
			return nil
		}
		hi, lo := expect(L)
		gotHi, gotLo := slices.Max(p), slices.Min(p)
		if gotHi < hi || gotLo > lo {
			c := int(math.Max(math.Abs(gotHi), math.Abs(gotLo)))
			return &c
		}
	}
	return nil
}

// blockTerm is what a block's position term shows whichever way its
// sinusoid is held: the global biases (q plus a constant in both the
// position term and the content scores) and the relative shift, set in
// params (notes when the shift is not one); it returns the block's
// evidence and the nodes of the term.
func blockTerm(w *work.Work, b *attn.Block, t attn.ScoreTerm, params *Params, notes *[]string) (RelSinBlock, []*graph.Node) {
	ev := RelSinBlock{Layer: b.Index, Prod: w.OrigName(t.Prod), Content: w.Name(t.Content), Pos: w.Name(t.Pos)}
	nodes := append([]*graph.Node{t.Prod}, t.Path...)
	qv, vAdd := biasedQ(w, t.Content)
	if vAdd != nil {
		for _, qk := range []*graph.Value{b.QK.Input(0), b.QK.Input(1)} {
			if qu, uAdd := biasedQ(w, qk); uAdd != nil && attn.OpRoot(w, qu) == attn.OpRoot(w, qv) {
				params.GlobalBiases = true
				ev.U, ev.V = w.Name(uAdd.Input(1-w.ActInputs(uAdd)[0])), w.Name(vAdd.Input(1-w.ActInputs(vAdd)[0]))
				nodes = append(nodes, uAdd, vAdd)
			}
		}
	}
	ops := map[string]bool{}
	for _, n := range t.Path {
		ops[n.OpType] = true
		if n.OpType != "Add" && n.OpType != "Mul" && n.OpType != "Div" {
			ev.Shift = append(ev.Shift, w.OrigName(n))
		}
	}
	switch {
	case ops["Concat"] && ops["Reshape"] && ops["Slice"]:
		params.RelShift = "pad_reshape_slice"
	case ops["Reshape"] && ops["Slice"]:
		// XLNet's rel_shift_bnij: the columns kept by index_select of
		// 0..klen-1, or by a slice (ONNX Runtime rewrites one into the other).
		params.RelShift = "reshape_slice"
	default:
		*notes = append(*notes, "rel_shift: the position scores reach the scores without a pad/reshape/slice shift")
	}
	return ev, nodes
}

// distancesAt evaluates the angles at probe length L and divides them by
// the frequencies: the distance of every row (nil when not evaluated).
func distancesAt(w *work.Work, src angleSource, L int, omega []float64) []float64 {
	rows, _ := src(L)
	if rows == nil || len(rows[0]) != len(omega) {
		return nil
	}
	jm := 0
	for j := range omega {
		if omega[j] > omega[jm] {
			jm = j
		}
	}
	out := make([]float64, len(rows))
	for r := range out {
		out[r] = math.Round(rows[r][jm] / omega[jm])
	}
	return out
}

// distanceTable finds, in a cone, a stored [rows, 2k] table gathered by an
// index computed from the positions: a relative sinusoid as onnxpe rewrite
// stores it.
func distanceTable(w *work.Work, cone []*graph.Node) *graph.Value {
	for _, n := range cone {
		if n.OpType == "Gather" && w.IsConst(n.Input(0)) && !w.IsConst(n.Input(1)) {
			if d := n.Input(0).Const.Dims(); len(d) == 2 && d[1]%2 == 0 {
				return n.Output(0)
			}
		}
	}
	return nil
}

// biasedQ matches v (through layout ops) as an activation plus a constant:
// it returns the activation and the Add.
func biasedQ(w *work.Work, v *graph.Value) (*graph.Value, *graph.Node) {
	v = attn.OpRoot(w, v)
	n := v.Producer()
	if n == nil || n.OpType != "Add" || len(n.Inputs()) != 2 {
		return nil, nil
	}
	acts := w.ActInputs(n)
	if len(acts) != 1 || !w.IsConst(n.Input(1-acts[0])) {
		return nil, nil
	}
	return n.Input(acts[0]), n
}

// sinCosTable is the value joining sin and cos into the sinusoid (a
// Concat of the two, through layout ops), or nil.
func sinCosTable(w *work.Work, cone []*graph.Node, sinN, cosN *graph.Node) *graph.Value {
	from := func(v *graph.Value, n *graph.Node) bool {
		for steps := 0; steps < 6 && v != nil; steps++ {
			if v.Producer() == n {
				return true
			}
			p := v.Producer()
			if p == nil || !work.LayoutOps[p.OpType] {
				return false
			}
			v = p.Input(0)
		}
		return false
	}
	for _, n := range cone {
		if n.OpType != "Concat" || len(n.Inputs()) != 2 {
			continue
		}
		if from(n.Input(0), sinN) && from(n.Input(1), cosN) || from(n.Input(0), cosN) && from(n.Input(1), sinN) {
			return n.Output(0)
		}
	}
	return nil
}

// relSinExact reads the exact arithmetic of a computed relative sinusoid:
// which columns of the table hold the sin and the cos of every frequency
// (by value, on the sample rows at their distances) and the product of
// distances and frequencies the Sin and Cos read, confirmed on the
// sample.
func relSinExact(w *work.Work, angles, table *graph.Value, ev *Evidence) (*probe.Angles, [][2]int, string) {
	rows, dist, omega := ev.Sample, ev.Distances, ev.Omega
	if len(rows) != len(dist) || len(rows) == 0 || len(rows[0]) != 2*len(omega) {
		return nil, nil, "the sample rows do not match the distances and frequencies"
	}
	pairs := make([][2]int, len(omega))
	for k := range pairs {
		pairs[k] = [2]int{-1, -1}
	}
	for c := range rows[0] {
		for k, om := range omega {
			isSin, isCos := true, true
			for r := range rows {
				t := dist[r] * om
				isSin = isSin && math.Abs(rows[r][c]-math.Sin(t)) < 1e-4
				isCos = isCos && math.Abs(rows[r][c]-math.Cos(t)) < 1e-4
			}
			if isSin && pairs[k][0] < 0 {
				pairs[k][0] = c
				break
			}
			if isCos && pairs[k][1] < 0 {
				pairs[k][1] = c
				break
			}
		}
	}
	for k, p := range pairs {
		if p[0] < 0 || p[1] < 0 {
			return nil, nil, fmt.Sprintf("no column of the table holds the sin or the cos of frequency %d", k)
		}
	}
	a, why := probe.ExactAngles(w, []*graph.Value{table}, omega, w.ElemType(table))
	if a == nil {
		return nil, nil, why
	}
	if a.Program != nil {
		return nil, nil, "the frequencies depend on the length"
	}
	cos, sin := make([][]float64, len(rows)), make([][]float64, len(rows))
	for r, row := range rows {
		for _, p := range pairs {
			sin[r] = append(sin[r], row[p[0]])
			cos[r] = append(cos[r], row[p[1]])
		}
	}
	if why := a.ConfirmAt(dist, a.Freq, cos, sin); why != "" {
		return nil, nil, why
	}
	return a, pairs, ""
}

// MergeEvidence takes the blocks of another finding's evidence.
func (ev *Evidence) MergeEvidence(from any, _ func([]string) []string) {
	ev.Blocks = append(ev.Blocks, from.(*Evidence).Blocks...)
}
