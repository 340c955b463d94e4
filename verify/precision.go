package verify

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// PrecisionOptions configure Precision.
type PrecisionOptions struct {
	// As audits the values as if the model held them in this type
	// (float16 or bfloat16); Undefined audits the model's own type.
	As graph.DataType
	// Positions is how many positions to check, 0..Positions-1 (0: the
	// rows of a stored table, or the sweep's largest position + 1).
	Positions int
	// Bound is the largest accepted difference from float64 (0: the
	// default absolute tolerance of the audited type).
	Bound   float64
	Threads int
	// Hints are facts about the model known beforehand.
	Hints Hints
}

// PrecisionSchema is the JSON Schema (draft 2020-12) of a
// PrecisionReport: what `onnxpe verify --precision --json` prints
// (precision.schema.json).
//
//go:embed precision.schema.json
var PrecisionSchema []byte

// PrecisionReport says how precisely a model's cos/sin (RoPE) or
// sinusoidal values hold positions in their float type, against the
// same values computed in float64.
type PrecisionReport struct {
	Model string `json:"model"`
	// DType is the type audited (the model's, or PrecisionOptions.As).
	DType     string              `json:"dtype"`
	Positions int                 `json:"positions"`
	Bound     float64             `json:"bound"`
	Encodings []EncodingPrecision `json:"encodings"`
	// OK is false when a value exceeds the bound within the positions.
	OK      bool   `json:"ok"`
	Summary string `json:"summary"`
}

// EncodingPrecision is one set of cos/sin values: computed by Cos and
// Sin nodes, or stored in tables.
type EncodingPrecision struct {
	Source string `json:"source"`
	// Stored is true for tables, false for values computed in the graph.
	Stored      bool                 `json:"stored"`
	DType       string               `json:"dtype"`
	Frequencies []FrequencyPrecision `json:"frequencies"`
}

// FrequencyPrecision is the audit of one frequency (one cos/sin pair).
type FrequencyPrecision struct {
	Index int `json:"index"`
	// Frequency is the angle per position in radians (fitted in float64
	// from the model's own values); Phase the angle at position 0.
	Frequency float64 `json:"frequency"`
	Phase     float64 `json:"phase,omitempty"`
	// Amplitude is 1 unless the values are scaled (YaRN tables).
	Amplitude float64 `json:"amplitude"`
	// FirstIndistinct is the first position whose (cos, sin) pair equals
	// the previous position's in the audited type; -1 when none does.
	FirstIndistinct int `json:"first_indistinct"`
	// FirstOverBound is the first position where cos or sin is further
	// than the bound from float64; -1 when none is.
	FirstOverBound int     `json:"first_over_bound"`
	MaxErr         float64 `json:"max_err"`
}

// cosSin is one (cos, sin) series over positions in float64, with the
// angles when the graph computes them.
type cosSin struct {
	c, s, angle []float64
	amp         float64
	// skip marks padding rows of a stored table (all zero), which hold
	// no position.
	skip []bool
}

// Precision audits the cos/sin values of model m: it finds Cos/Sin pairs
// computing them and stored sin/cos tables read at positions, evaluates
// them at positions 0..N-1 (running only the subgraph that computes
// them), and compares each frequency with float64.
func Precision(ctx context.Context, m *graph.Model, opts PrecisionOptions) (*PrecisionReport, error) {
	a, err := Analyze(m, opts.Hints, opts.Threads)
	if err != nil {
		return nil, err
	}
	rep := &PrecisionReport{OK: true}
	n := opts.Positions
	if n <= 0 {
		n = max(a.MaxLength, a.MaxPosition+1, DefaultLongSequence)
	}
	var encs []*EncodingPrecision
	var series [][]cosSin
	computed, err := computedCosSin(ctx, m, a, n, opts.Threads)
	if err != nil {
		return nil, err
	}
	for _, cs := range computed {
		encs = append(encs, &EncodingPrecision{Source: cs.source, DType: cs.dt.String()})
		series = append(series, cs.cols)
		rep.Positions = n
	}
	for _, t := range storedCosSin(a) {
		if dup := slices.IndexFunc(series, func(s []cosSin) bool { return sameSeries(s, t.cols) }); dup >= 0 {
			encs[dup].Source += "; the same values in " + strings.TrimSuffix(t.source, " (stored)")
			continue
		}
		encs = append(encs, &EncodingPrecision{Source: t.source, Stored: true, DType: t.dt.String()})
		series = append(series, t.cols)
		rep.Positions = max(rep.Positions, len(t.cols[0].c))
	}
	if len(encs) == 0 {
		return nil, errors.New("no cos/sin or sinusoidal values found: the model computes no Cos/Sin pair at positions and stores no sin/cos table")
	}
	dt := opts.As
	for i, e := range encs {
		edt := dt
		if edt == graph.Undefined {
			edt, _ = graph.ParseDataType(e.DType)
		}
		e.DType = edt.String()
		if i == 0 {
			rep.DType = e.DType
		}
		bound := opts.Bound
		if bound <= 0 {
			bound = DefaultTolerance(edt).Atol
		}
		rep.Bound = bound
		e.Frequencies = auditSeries(series[i], edt, bound)
		for _, f := range e.Frequencies {
			if f.FirstOverBound >= 0 {
				rep.OK = false
			}
		}
		rep.Encodings = append(rep.Encodings, *e)
	}
	rep.Summary = precisionSummary(rep)
	return rep, nil
}

func sameSeries(a, b []cosSin) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i].c, b[i].c) || !slices.Equal(a[i].s, b[i].s) {
			return false
		}
	}
	return true
}

// auditSeries fits every (cos, sin) series and compares it with float64.
func auditSeries(cols []cosSin, dt graph.DataType, bound float64) []FrequencyPrecision {
	var out []FrequencyPrecision
	for _, col := range cols {
		f, phase, amp := fit(col)
		fp := FrequencyPrecision{Frequency: f, Phase: phase, Amplitude: amp, FirstIndistinct: -1, FirstOverBound: -1}
		// Duplicated halves (cat(freqs, freqs)) are audited once.
		dup := false
		for _, o := range out {
			if o.Frequency == f && o.Phase == phase {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		fp.Index = len(out)
		var pc, ps float64
		first := true
		for p := range col.c {
			if col.skip != nil && col.skip[p] {
				continue
			}
			c, s := graph.RoundTo(dt, col.c[p]), graph.RoundTo(dt, col.s[p])
			th := f*float64(p) + phase
			e := math.Max(math.Abs(c-amp*math.Cos(th)), math.Abs(s-amp*math.Sin(th)))
			fp.MaxErr = math.Max(fp.MaxErr, e)
			if fp.FirstOverBound < 0 && !(e <= bound) {
				fp.FirstOverBound = p
			}
			if !first && fp.FirstIndistinct < 0 && c == pc && s == ps {
				fp.FirstIndistinct = p
			}
			pc, ps, first = c, s, false
		}
		out = append(out, fp)
	}
	return out
}

// fit finds the frequency, phase and amplitude of a series in float64:
// from the graph's angles when known (a least-squares line: the angles'
// rounding errors average out), else from the unwrapped atan2 of the
// values.
func fit(col cosSin) (f, phase, amp float64) {
	n := len(col.c)
	kept := func(p int) bool { return col.skip == nil || !col.skip[p] }
	theta := col.angle
	if theta == nil {
		theta = make([]float64, n)
		prev, started := 0.0, false
		for p := range theta {
			if !kept(p) {
				continue
			}
			t := math.Atan2(col.s[p], col.c[p])
			if started {
				// unwrap: the step from the previous angle in (-pi, pi]
				d := t - math.Mod(prev, 2*math.Pi)
				d = math.Remainder(d, 2*math.Pi)
				t = prev + d
			}
			theta[p] = t
			prev, started = t, true
		}
	}
	var sx, sy, sxx, sxy, nn float64
	for p, t := range theta {
		if !kept(p) {
			continue
		}
		nn++
		x := float64(p)
		sx += x
		sy += t
		sxx += x * x
		sxy += x * t
	}
	if den := nn*sxx - sx*sx; den != 0 {
		f = (nn*sxy - sx*sy) / den
	}
	phase = (sy - f*sx) / nn
	if math.Abs(phase) < 1e-9 {
		phase = 0
	}
	amp = col.amp
	if amp == 0 {
		var sum float64
		for p := range col.c {
			if kept(p) {
				sum += math.Hypot(col.c[p], col.s[p])
			}
		}
		amp = sum / nn
		if math.Abs(amp-1) < 1e-3 {
			amp = 1
		}
	}
	return f, phase, amp
}

type foundSeries struct {
	source string
	dt     graph.DataType
	cols   []cosSin
}

// computedCosSin evaluates the Cos/Sin pairs of m's main graph at
// positions 0..n-1, running only the nodes they depend on.
func computedCosSin(ctx context.Context, m *graph.Model, a *Analysis, n, threads int) ([]foundSeries, error) {
	type pair struct {
		angle    *graph.Value
		cos, sin *graph.Value // the values the model uses (after a Cast)
	}
	var pairs []pair
	nodes := m.Graph.Nodes()
	used := func(v *graph.Value) *graph.Value {
		// Values cast to another float type after the Cos/Sin (and a
		// scaling or reshaping on the way) are those the model uses.
		for w, depth := v, 0; depth < 8; depth++ {
			us := w.Uses()
			if len(us) != 1 {
				break
			}
			n := us[0].Node
			switch {
			case n.OpType == "Cast" && graph.DataType(n.AttrInt("to", 0)).IsFloat():
				return n.Output(0)
			case n.OpType == "Mul" || n.OpType == "Div":
				if _, c := graph.ConstantValue(n.Input(1 - us[0].Index)); !c {
					return v
				}
			case n.OpType == "Unsqueeze" || n.OpType == "Reshape" || n.OpType == "Identity" || n.OpType == "Transpose":
			default:
				return v
			}
			w = n.Output(0)
		}
		return v
	}
	for _, c := range nodes {
		if c.OpType != "Cos" || !isONNX(c.Domain) {
			continue
		}
		for _, s := range nodes {
			if s.OpType == "Sin" && isONNX(s.Domain) && s.Input(0) == c.Input(0) {
				if a.d.any[c.Input(0)].any() { // depends on the input: positions
					pairs = append(pairs, pair{angle: c.Input(0), cos: used(c.Output(0)), sin: used(s.Output(0))})
				}
				break
			}
		}
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	sub, err := graph.Decode(data, m.Dir)
	if err != nil {
		return nil, err
	}
	var outs []*graph.Value
	for _, p := range pairs {
		for _, v := range []*graph.Value{p.angle, p.cos, p.sin} {
			w := sub.Graph.Lookup(v.Name)
			if w == nil || v.Name == "" {
				return nil, fmt.Errorf("value %q has no name to read it by", v.Name)
			}
			outs = append(outs, w)
		}
	}
	sub.Graph.Outputs = outs
	sub.Graph.EliminateDeadCode()
	spec := SetSpec{Name: "positions", Batch: 1, Seq: n}
	if a.FixedSeq > 0 {
		spec.Seq = a.FixedSeq
	}
	set, err := a.synthesize(spec, 1)
	if err != nil {
		return nil, err
	}
	s, err := kernels.NewSession(sub, kernels.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := s.Run(set.inputs)
	if err != nil {
		return nil, fmt.Errorf("computing the cos/sin values at %d positions: %w", n, err)
	}
	var found []foundSeries
	for _, p := range pairs {
		ang, c, sn := res[p.angle.Name], res[p.cos.Name], res[p.sin.Name]
		am, cm, sm := byPosition(ang, spec.Seq), byPosition(c, spec.Seq), byPosition(sn, spec.Seq)
		if am == nil || cm == nil || sm == nil || len(am) != len(cm) || len(cm) != len(sm) {
			continue
		}
		fs := foundSeries{source: fmt.Sprintf("Cos/Sin of %q (computed)", p.angle.Name), dt: c.DType}
		for j := range cm {
			fs.cols = append(fs.cols, cosSin{c: cm[j], s: sm[j], angle: am[j]})
		}
		found = append(found, fs)
	}
	return found, nil
}

// byPosition turns a tensor with one axis of size n into columns over
// that axis (index 0 on the axes before it, the axes after it
// flattened): cols[j][p].
func byPosition(t *kernels.Tensor, n int) [][]float64 {
	if t == nil {
		return nil
	}
	ax := -1
	for i, d := range t.Shape {
		if d == n {
			ax = i
		}
	}
	if ax < 0 {
		return nil
	}
	inner := 1
	for _, d := range t.Shape[ax+1:] {
		inner *= d
	}
	v := t.Float64s()
	cols := make([][]float64, inner)
	for j := range cols {
		cols[j] = make([]float64, n)
		for p := 0; p < n; p++ {
			cols[j][p] = v[p*inner+j]
		}
	}
	return cols
}

// storedCosSin finds sin/cos columns in the stored tables a model reads
// at positions: a column starting at 0 (sin) pairs with one starting at
// its amplitude (cos) when sin²+cos² stays constant down the rows.
func storedCosSin(a *Analysis) []foundSeries {
	type column struct {
		v   []float64
		src string
		dt  graph.DataType
	}
	var sins, coss []column
	seen := map[string]bool{}
	for _, r := range a.reads {
		if r.token || r.rows[0] == 0 || r.rows[0] != r.rows[1] || seen[r.data.Name] {
			continue
		}
		t := r.value
		if t == nil || !t.DType.IsFloat() {
			continue
		}
		seen[r.data.Name] = true
		ax := r.axis
		if ax < 0 {
			ax += len(t.Shape)
		}
		if ax < 0 || ax >= len(t.Shape) {
			continue
		}
		// Move the read axis first: columns are all other positions.
		rows := t.Shape[ax]
		inner := 1
		for _, d := range t.Shape[ax+1:] {
			inner *= d
		}
		outer := t.Len() / max(rows*inner, 1)
		v := t.Float64s()
		for o := 0; o < outer; o++ {
			for j := 0; j < inner; j++ {
				col := make([]float64, rows)
				for p := range col {
					col[p] = v[(o*rows+p)*inner+j]
				}
				c := column{v: col, src: r.data.Name, dt: t.DType}
				switch {
				case col[0] == 0 && inRange(col):
					sins = append(sins, c)
				case col[0] > 0 && inRange(col):
					coss = append(coss, c)
				}
			}
		}
	}
	bySource := map[string]*foundSeries{}
	var order []string
	used := make([]bool, len(coss))
	for _, s := range sins {
		for k, c := range coss {
			if used[k] || len(c.v) != len(s.v) {
				continue
			}
			// Rows where both are 0 are padding (fairseq's padding_idx
			// row): they hold no position.
			skip := make([]bool, len(s.v))
			for p := range skip {
				skip[p] = p > 0 && s.v[p] == 0 && c.v[p] == 0
			}
			if !pairs(s.v, c.v, skip) {
				continue
			}
			used[k] = true
			src := "table " + quote(s.src)
			if c.src != s.src {
				src = "tables " + quote(c.src) + " (cos) and " + quote(s.src) + " (sin)"
			}
			fs := bySource[src]
			if fs == nil {
				fs = &foundSeries{source: src + " (stored)", dt: s.dt}
				bySource[src] = fs
				order = append(order, src)
			}
			fs.cols = append(fs.cols, cosSin{c: c.v, s: s.v, skip: anyTrue(skip)})
			break
		}
	}
	var out []foundSeries
	for _, k := range order {
		out = append(out, *bySource[k])
	}
	return out
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// inRange reports whether a column holds values of a bounded oscillation
// (|v| <= 4: cos/sin with a scaling factor).
func inRange(v []float64) bool {
	if len(v) < 3 {
		return false
	}
	for _, x := range v {
		if !(math.Abs(x) <= 4) {
			return false
		}
	}
	return true
}

func anyTrue(b []bool) []bool {
	if slices.Contains(b, true) {
		return b
	}
	return nil
}

// pairs reports whether s and c are the sine and cosine of one angle:
// s²+c² stays at its value in the first row (within the precision of the
// values), padding rows apart.
func pairs(s, c []float64, skip []bool) bool {
	p0 := slices.Index(skip, false)
	if p0 < 0 {
		return false
	}
	a2 := c[p0]*c[p0] + s[p0]*s[p0]
	varies := false
	for p := range s {
		if skip[p] {
			continue
		}
		if math.Abs(s[p]*s[p]+c[p]*c[p]-a2) > 2e-2*a2 {
			return false
		}
		varies = varies || s[p] != 0
	}
	return varies
}

func precisionSummary(r *PrecisionReport) string {
	worstOver, worstInd := -1, -1
	nf := 0
	for _, e := range r.Encodings {
		for _, f := range e.Frequencies {
			nf++
			if f.FirstOverBound >= 0 && (worstOver < 0 || f.FirstOverBound < worstOver) {
				worstOver = f.FirstOverBound
			}
			if f.FirstIndistinct >= 0 && (worstInd < 0 || f.FirstIndistinct < worstInd) {
				worstInd = f.FirstIndistinct
			}
		}
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("%d frequenc%s in %d encoding%s, %s, positions 0..%d", nf, map[bool]string{true: "y", false: "ies"}[nf == 1], len(r.Encodings), plural(len(r.Encodings)), r.DType, r.Positions-1))
	if worstOver >= 0 {
		parts = append(parts, fmt.Sprintf("values exceed %.3g from position %d", r.Bound, worstOver))
	} else {
		parts = append(parts, fmt.Sprintf("all values within %.3g of float64", r.Bound))
	}
	if worstInd >= 0 {
		parts = append(parts, fmt.Sprintf("consecutive positions share values from position %d", worstInd))
	} else {
		parts = append(parts, "every position's values are distinct")
	}
	verdict := "ok"
	if !r.OK {
		verdict = "over bound"
	}
	return verdict + ": " + strings.Join(parts, "; ")
}

// WriteTable prints the precision audit for people.
func (r *PrecisionReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "model: %s\naudited as %s, positions 0..%d, bound %.3g against float64\n", r.Model, r.DType, r.Positions-1, r.Bound)
	for _, e := range r.Encodings {
		fmt.Fprintf(w, "\n%s, %s\n", e.Source, e.DType)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FREQ\tRAD/POS\tAMPLITUDE\tMAX ERR\tOVER BOUND FROM\tINDISTINCT FROM\t")
		for _, f := range e.Frequencies {
			over, ind := "-", "-"
			if f.FirstOverBound >= 0 {
				over = fmt.Sprint(f.FirstOverBound)
			}
			if f.FirstIndistinct >= 0 {
				ind = fmt.Sprint(f.FirstIndistinct)
			}
			fmt.Fprintf(tw, "%d\t%.6g\t%.6g\t%.3g\t%s\t%s\t\n", f.Index, f.Frequency, f.Amplitude, f.MaxErr, over, ind)
		}
		tw.Flush()
	}
	_, err := fmt.Fprintln(w, r.Summary)
	return err
}
