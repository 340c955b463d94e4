package rope

import (
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// rotation is what probing one side's region measured.
type rotation struct {
	pairs     [][2]int // (first, second) dimension of each rotary pair, in frequency order
	layout    string
	headDim   int
	rotaryDim int
	omega     []float64 // radians per position, per pair
	omegaLong []float64
	amp       float64
	synthetic bool
	half      bool // computed in float16/bfloat16
	// halfAngles: the angles position·frequency themselves are computed
	// in a half type, not only the cos/sin or the rotation (anglesInHalf).
	halfAngles bool
	noise      float64 // RMS of the angles around their linear fit
	heads      int
	table      string
	tableRows  int
	// pastLength: positions are counted from the length of a KV cache
	// given as input.
	pastLength bool
	// dynamic holds frequencies measured at other largest positions when
	// they differ from the first measurement; remeasure measures at a
	// given largest position.
	dynamic   []dynPoint
	remeasure func(L int) (dynPoint, bool)
	posAxis   int
	seq       int
	// powBase is the base the graph raises to the frequency exponents, when
	// the frequencies were computed from it (0 otherwise).
	powBase float64
	// axial is the grid of a 2-D rotation (rope_axes.go), sections the
	// frequencies per stream of multi-stream positions (M-RoPE).
	axial    *axialRot
	sections []int
	// streamsIn is the [streams, batch, seq] positions input and
	// pairStream the stream turning each pair (M-RoPE).
	streamsIn  *graph.Value
	pairStream []int
}

type dynPoint struct {
	L     int // largest position + 1
	span  int // positions measured
	omega []float64
}

// probeSeqs are the sequence lengths tried, largest first (a stored table
// may be shorter).
var probeSeqs = []int{16, 8, 4}

// measureRotation probes a side's region with unit vectors.
func measureRotation(w *work.Work, s *attn.Side) (*rotation, string) {
	var last string
	for _, seq := range probeSeqs {
		p := probe.NewProbe(w, 1, seq, 0)
		r, why := measureAt(w, p, s)
		if r != nil {
			checkDynamic(w, s, r)
			measureStreams(w, s, r)
			checkOpenGrid(w, s, r)
			return r, ""
		}
		last = why
	}
	return nil, last
}

// unitProbe evaluates the side's output with q set, per slot (every index
// but the last axis), to the vector vec(slot).
func unitProbe(w *work.Work, p *probe.Probe, s *attn.Side, shape []int, vec func(slot int, row []float64)) ([]float64, error) {
	d := shape[len(shape)-1]
	total := 1
	for _, x := range shape {
		total *= x
	}
	vals := make([]float64, total)
	for k := 0; k < total/d; k++ {
		vec(k, vals[k*d:(k+1)*d])
	}
	t := probe.FromFloat64Any(w.ElemType(s.In), shape, vals)
	if t == nil {
		return nil, fmt.Errorf("q of element type %v cannot be probed", w.ElemType(s.In))
	}
	p.SetCuts(map[*graph.Value]*kernels.Tensor{s.In: t})
	out, err := p.Value(s.Out)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(out.Shape, shape) {
		return nil, fmt.Errorf("the rotated value has shape %v, q has %v", out.Shape, shape)
	}
	return out.Float64s(), nil
}

func measureAt(w *work.Work, p *probe.Probe, s *attn.Side) (*rotation, string) {
	shape, ok := p.BindShape(w.Shape(s.In))
	if !ok || len(shape) < 2 {
		return nil, fmt.Sprintf("the shape %s of %s is not known", w.ShapeString(w.Shape(s.In)), w.Name(s.In))
	}
	d := shape[len(shape)-1]
	slots := 1
	for _, x := range shape[:len(shape)-1] {
		slots *= x
	}
	if d < 2 || slots < 2 {
		return nil, "q has fewer than 2 dimensions or positions"
	}
	// 1. Which dimensions pair up: one unit vector per slot, the column
	// moving from slot to slot.
	partner := make([]map[int]int, d)
	// selfSeen counts the evaluations (not the slots: the slots of one
	// evaluation repeat a few positions over the batch and heads) in which
	// a dimension stayed unturned.
	selfSeen := make([]int, d)
	selfAt := make([]int, d)
	mixed := 0
	maxEv := min(64, 3*((d+slots-1)/slots)+3)
	for ev := 0; ev < maxEv; ev++ {
		col := func(k int) int { return (k + ev*slots + ev) % d }
		out, err := unitProbe(w, p, s, shape, func(k int, row []float64) { row[col(k)] = 1 })
		if err != nil {
			return nil, "probe: " + err.Error()
		}
		for k := 0; k < slots; k++ {
			row := out[k*d : (k+1)*d]
			c := col(k)
			var others []int
			for i, x := range row {
				if i != c && x != 0 {
					others = append(others, i)
				}
			}
			if row[c] != 0 && selfAt[c] != ev+1 {
				selfSeen[c]++
				selfAt[c] = ev + 1
			}
			switch len(others) {
			case 0:
			case 1:
				if partner[c] == nil {
					partner[c] = map[int]int{}
				}
				partner[c][others[0]]++
			default:
				mixed++
			}
		}
		done := true
		for c := 0; c < d; c++ {
			if partner[c] == nil && selfSeen[c] < 3 {
				done = false
			}
		}
		if done && ev >= 1 {
			break
		}
	}
	if mixed > 0 {
		return nil, "the region mixes more than two dimensions of q (not a rotation of pairs)"
	}
	pair := make([]int, d)
	var rot []int
	for c := 0; c < d; c++ {
		pair[c] = -1
		best := 0
		for o, n := range partner[c] {
			if n > best || n == best && o < pair[c] {
				pair[c], best = o, n
			}
		}
		if pair[c] >= 0 {
			rot = append(rot, c)
		}
	}
	if len(rot) == 0 {
		return nil, "no dimensions of q are paired (no rotation)"
	}
	for _, c := range rot {
		if pair[pair[c]] != c {
			return nil, fmt.Sprintf("dimension %d pairs with %d but %d pairs with %d", c, pair[c], pair[c], pair[pair[c]])
		}
	}
	r := &rotation{headDim: d, rotaryDim: len(rot), half: probe.IsHalfType(w.ElemType(s.Out))}
	o := rot[0]
	rd := len(rot)
	contiguous := rot[len(rot)-1] == o+rd-1 && rd%2 == 0
	switch {
	case contiguous && pairsAll(rot, func(c int) bool { return c-o < rd/2 == (pair[c] == c+rd/2) && (c-o >= rd/2) == (pair[c] == c-rd/2) }):
		r.layout = "half_split"
		for k := 0; k < rd/2; k++ {
			r.pairs = append(r.pairs, [2]int{o + k, o + k + rd/2})
		}
	case contiguous && pairsAll(rot, func(c int) bool { return pair[c] == c+1-2*((c-o)%2) }):
		r.layout = "interleaved"
		for k := 0; k < rd/2; k++ {
			r.pairs = append(r.pairs, [2]int{o + 2*k, o + 2*k + 1})
		}
	default:
		return nil, fmt.Sprintf("the rotary pairs %v follow neither the half-split nor the interleaved layout", pair)
	}
	if o != 0 {
		return nil, fmt.Sprintf("the rotary dimensions start at %d, not at the head's first dimension", o)
	}
	// 2. The angles: the first dimension of every pair set in every slot.
	theta, amp, err := angles(w, p, s, shape, r.pairs)
	if err != nil {
		return nil, "probe: " + err.Error()
	}
	r.synthetic = p.Synthetic(s.Out)
	// 3. The axis along which the angles change is the position.
	r.posAxis = -1
	for a := 0; a < len(shape)-1; a++ {
		if shape[a] < 2 {
			continue
		}
		stride := 1
		for _, x := range shape[a+1 : len(shape)-1] {
			stride *= x
		}
		for k := range r.pairs {
			// Anywhere along the axis: tokens before a patch grid (a class
			// token) and the grid's first cell do not turn.
			for i := 1; i < shape[a]; i++ {
				if math.Abs(theta[k][0]-theta[k][i*stride]) > 1e-6 {
					if r.posAxis >= 0 && r.posAxis != a {
						return nil, "the angles change along two axes of q"
					}
					r.posAxis = a
					break
				}
			}
		}
	}
	if r.posAxis < 0 {
		return nil, "the angles do not change with the position"
	}
	r.seq = shape[r.posAxis]
	r.omega, r.amp, r.noise = omegas(theta, amp, shape, r.posAxis)
	if slices.ContainsFunc(r.omega, math.IsNaN) && !p.Synthetic(s.Out) {
		// Not linear in the token's index: a rotation over a patch grid?
		if ax, om, res, ok := axialAngles(theta, shape, r.posAxis); ok {
			r.axial, r.omega, r.noise = ax, om, res
		}
	}
	if r.noise > 1e-5 {
		r.half = true // the cos/sin went through a half type somewhere
	}
	r.halfAngles = r.half && anglesInHalf(w, w.Cone(s.Pos...))
	if r.synthetic {
		// cos/sin made from values the probe made up: the pairs are the
		// model's, the angles are not.
		r.omega, r.amp, r.noise = nil, math.NaN(), 0
	}
	for _, x := range r.omega {
		if math.IsNaN(x) {
			return nil, "the angles are not linear in the position"
		}
	}
	if len(r.omega) > 0 && r.omega[0] < 0 {
		for i := range r.omega {
			r.omega[i] = -r.omega[i]
		}
	}
	// Heads: the other axis of a 4-D q.
	if len(shape) == 4 {
		for a := 1; a < 3; a++ {
			if a != r.posAxis {
				r.heads = shape[a]
			}
		}
	}
	cone := w.Cone(s.Pos...)
	tv, rows := probe.PositionTable(w, cone)
	if tv == nil && !r.synthetic && r.axial == nil {
		// Positions the shapes fix (a static export): normalisation folded
		// the table's read into the rows read, and the table still holds
		// all of its rows. A table of fewer rows than the positions measured
		// is not what they were read from.
		if fv, _, fr := probe.FixedTableRead(w, probe.FoldedCone(w, cone, s.Pos...)); fv != nil && fr >= r.seq {
			tv, rows = fv, fr
		}
	}
	if tv != nil {
		r.table, r.tableRows = w.Name(tv), rows
		if r.half && !r.synthetic && r.axial == nil && probe.ReadsPositions(w, cone) {
			refineOverTable(w, s, r)
		}
	}
	if !probe.ReadsPositions(w, cone) {
		for _, n := range cone {
			if n.OpType == "Shape" && w.CacheInput(n.Input(0)) && probe.HasPastSize(w, n.Input(0)) {
				r.pastLength = true
			}
		}
	}
	r.powBase = probe.ConeBase(w, cone)
	return r, ""
}

// refineOverTable measures the frequencies of a rotation read from a
// stored half-type table across the table's rows: every entry of a
// float16 cos/sin table is the cos or sin of a float32 (or float64) angle
// rounded once, off by up to 2^-11 whatever the row, so the angle's error
// does not grow with the position and the phase at row P, measured to
// that error, gives the frequency to 2^-11/P. The first probe's 16
// positions know the lowest frequencies to ~1e-4 of themselves, which a
// table of 4096 rows turns into 0.01 rad at its last row (more than the
// tables' rounding: extend could not tell which pair a column holds).
// Phases are compared at rows growing sixteenfold, so that the frequency
// known before places the next phase within a fraction of a turn.
func refineOverTable(w *work.Work, s *attn.Side, r *rotation) {
	const m = 16 // positions per measurement, averaged
	phases := func(start int) ([]float64, []float64, bool) {
		p := probe.NewProbe(w, 1, m, int64(start))
		p.Past = 0
		shape, ok := p.BindShape(w.Shape(s.In))
		if !ok || r.posAxis >= len(shape) || shape[r.posAxis] != m {
			return nil, nil, false
		}
		theta, amp, err := angles(w, p, s, shape, r.pairs)
		if err != nil {
			return nil, nil, false
		}
		stride := 1
		for _, x := range shape[r.posAxis+1 : len(shape)-1] {
			stride *= x
		}
		sign, _, _ := omegas(theta, amp, shape, r.posAxis)
		out := make([]float64, len(theta))
		for k := range theta {
			if math.IsNaN(sign[k]) {
				return nil, nil, false
			}
			// The phase at start: the mean of the window's angles taken
			// back to start along the frequency measured in the window.
			t0 := theta[k][0]
			mean := 0.0
			for i := 0; i < m; i++ {
				mean += math.Remainder(theta[k][i*stride]-t0-sign[k]*float64(i), 2*math.Pi) / m
			}
			out[k] = t0 + mean
		}
		return out, sign, true
	}
	at0, sign, ok := phases(0)
	if !ok {
		return
	}
	omega := slices.Clone(r.omega)
	for start := 256; ; start *= 16 {
		start = min(start, r.tableRows-m)
		if start <= m {
			return
		}
		ph, _, ok := phases(start)
		if !ok {
			return
		}
		next := slices.Clone(omega)
		for k := range next {
			sg := math.Copysign(1, sign[k])
			d := math.Remainder(ph[k]-at0[k]-sg*omega[k]*float64(start), 2*math.Pi)
			if math.Abs(d) > math.Pi/4 {
				return // not within a fraction of a turn: the rows do not follow one frequency
			}
			next[k] += sg * d / float64(start)
		}
		omega = next
		r.omega = slices.Clone(omega)
		if start == r.tableRows-m {
			return
		}
	}
}

func pairsAll(cs []int, f func(int) bool) bool {
	for _, c := range cs {
		if !f(c) {
			return false
		}
	}
	return true
}

// anglesInHalf reports whether the angles a cone takes the cos and sin of
// are computed in a half type: an input of one of its Cos or Sin nodes, or
// a float value of the cone it is computed from, is float16 or bfloat16.
// Then position·frequency itself is rounded to 2^-11 of its size (float16
// holds integers exactly up to 2048 only), and frequencies measured at far
// positions are as wrong as the position is large. Cos and sin computed in
// float32 and only then cast to a half type (Hugging Face's
// .to(x.dtype)) round their values, by 2^-11 at most whatever the
// position: the measured angles' noise, not their rounding. A cone
// without Cos or Sin (cos/sin an op computes from positions itself)
// counts as half.
func anglesInHalf(w *work.Work, cone []*graph.Node) bool {
	var angles []*graph.Value
	for _, n := range cone {
		if (n.OpType == "Cos" || n.OpType == "Sin") && work.IsONNX(n) && n.Input(0) != nil {
			angles = append(angles, n.Input(0))
		}
	}
	if len(angles) == 0 {
		return true
	}
	for _, v := range angles {
		if probe.IsHalfType(w.ElemType(v)) {
			return true
		}
	}
	for _, n := range w.Cone(angles...) {
		for _, o := range n.Outputs() {
			if o != nil && probe.IsHalfType(w.ElemType(o)) {
				return true
			}
		}
	}
	return false
}

// angles probes with the first dimension of every pair set and returns,
// per pair and slot, the angle and the amplitude of the rotation.
func angles(w *work.Work, p *probe.Probe, s *attn.Side, shape []int, pairs [][2]int) ([][]float64, [][]float64, error) {
	d := shape[len(shape)-1]
	out, err := unitProbe(w, p, s, shape, func(k int, row []float64) {
		for _, pr := range pairs {
			row[pr[0]] = 1
		}
	})
	if err != nil {
		return nil, nil, err
	}
	slots := len(out) / d
	theta := make([][]float64, len(pairs))
	amp := make([][]float64, len(pairs))
	for k, pr := range pairs {
		theta[k] = make([]float64, slots)
		amp[k] = make([]float64, slots)
		for sl := 0; sl < slots; sl++ {
			c, sn := out[sl*d+pr[0]], out[sl*d+pr[1]]
			theta[k][sl] = math.Atan2(sn, c)
			amp[k][sl] = math.Hypot(c, sn)
		}
	}
	return theta, amp, nil
}

// omegas fits each pair's frequency along the position axis (other axes
// at index 0) and averages the amplitude.
func omegas(theta, amp [][]float64, shape []int, axis int) ([]float64, float64, float64) {
	stride := 1
	for _, x := range shape[axis+1 : len(shape)-1] {
		stride *= x
	}
	n := shape[axis]
	out := make([]float64, len(theta))
	var sa, noise float64
	var na int
	for k := range theta {
		seq := make([]float64, n)
		for i := 0; i < n; i++ {
			seq[i] = theta[k][i*stride]
		}
		out[k] = probe.UnwrapSlope(seq)
		// Linear within a measurement; the residual is the noise of the
		// angles (float16 caches are noisier than float32 ones).
		var res []float64
		for i := 0; i < n; i++ {
			res = append(res, math.Remainder(seq[i]-seq[0]-out[k]*float64(i), 2*math.Pi))
		}
		mean := 0.0
		for _, r := range res {
			mean += r / float64(n)
		}
		var ss float64
		for _, r := range res {
			ss += (r - mean) * (r - mean)
			if math.Abs(r-mean) > 1e-2 {
				out[k] = math.NaN()
			}
		}
		noise = max(noise, math.Sqrt(ss/float64(n)))
		for _, a := range amp[k] {
			sa += a
			na++
		}
	}
	return out, sa / float64(na), noise
}

// checkDynamic measures the frequencies again at other positions: when
// they change, the cos/sin depend on the length (dynamic rules).
func checkDynamic(w *work.Work, s *attn.Side, r *rotation) {
	if r.synthetic || r.tableRows > 0 || r.axial != nil {
		return
	}
	hasPosInput := probe.ReadsPositions(w, w.Cone(s.Pos...))
	measure := func(start, seq int) (dynPoint, bool) {
		p := probe.NewProbe(w, 1, seq, int64(start))
		p.Past = 0 // the largest position is start+seq-1 however positions are counted
		shape, ok := p.BindShape(w.Shape(s.In))
		if !ok || r.posAxis >= len(shape) {
			return dynPoint{}, false
		}
		// A sequence the shapes fix longer: at seq positions given as
		// input, the other tokens repeating the last.
		measured := slices.Clone(shape)
		if hasPosInput && shape[r.posAxis] > seq {
			p.Span, measured[r.posAxis] = seq, seq
		}
		theta, amp, err := angles(w, p, s, shape, r.pairs)
		if err != nil {
			return dynPoint{}, false
		}
		om, _, _ := omegas(theta, amp, measured, r.posAxis)
		if slices.ContainsFunc(om, math.IsNaN) {
			return dynPoint{}, false
		}
		for i := range om {
			om[i] = math.Abs(om[i])
		}
		return dynPoint{L: start + seq, span: seq, omega: om}, true
	}
	// A model may refuse positions beyond its sequence (a table cut to
	// the sequence length, then gathered at the positions): it is
	// probed at 0..L-1 then, as models without position ids are.
	far := hasPosInput
	if far {
		if _, ok := measure(1000, r.seq); !ok {
			far = false
		}
	}
	// Far positions are measured over the probe's sequence length (over
	// halfSpan once frequencies are seen to change, when the cos/sin are
	// rounded to a half type and the angles are not).
	span := r.seq
	r.remeasure = func(L int) (dynPoint, bool) {
		if far {
			return measure(max(L-span, 0), min(span, L))
		}
		if L > 1<<16 {
			return dynPoint{}, false
		}
		return measure(0, L)
	}
	var probes []int // largest position + 1
	switch {
	case far && r.halfAngles:
		// Half types hold integers exactly up to 2048 only.
		probes = []int{4, 64 + r.seq, 256 + r.seq}
	case far:
		// Every fourfold length from 1000 to 100000: a rule that starts at
		// an original length of a few thousand (Llama's 2048 to 8192) is
		// seen changing at two lengths at least, which fitDynamic needs.
		probes = []int{4, 1000 + r.seq, 4000 + r.seq, 16000 + r.seq, 64000 + r.seq, 100000 + r.seq}
	case r.halfAngles:
		probes = []int{4, 4 * r.seq, 16 * r.seq}
	default:
		probes = dynamicProbes(r.seq)
	}
	r.findDynamic(probes)
	if r.dynamic != nil && far && r.half && !r.halfAngles {
		// Seen changing; measured again over halfSpan positions, precisely
		// enough to fit the rule (frequencies that do not change cost the
		// short probes only).
		span, r.dynamic = halfSpan, nil
		r.findDynamic(probes)
	}
}

// halfSpan is how many positions frequencies are measured over at far
// positions when the cos/sin are rounded to a half type but their angles
// are not (anglesInHalf): each measured angle is off by up to 2^-11 rad
// whatever the position, so over the 16 positions of the first probe the
// lowest frequencies of a Llama (1e-4 rad per position) are not resolved
// at all; over 1024 a frequency is known to 5e-7 rad per position, which
// places dynamic NTK's scale at 2·orig and 4·orig to 1e-5 and its original
// length to the position. One probe of 1024 positions evaluates only the
// cos/sin and the rotation.
const halfSpan = 1024

// dynamicProbes are the lengths a dynamic rule is looked for at when the
// probe counts positions from 0: 4, then fourfold lengths from 4·seq up to
// 16384 and 16384 itself; findDynamic adds 65536 (four times as long to
// measure as all the others) only once the frequencies were seen to
// change, so that a rule starting at an original length up to 8192
// (Llama's) changes at two lengths, which fitDynamic needs.
func dynamicProbes(seq int) []int {
	out := []int{4}
	for L := 4 * seq; L < 1<<14; L *= 4 {
		out = append(out, L)
	}
	return append(out, 1<<14)
}

// findDynamic measures r again (r.remeasure) at each largest position + 1
// of probes: when the frequencies change, r.dynamic holds every
// measurement, in the order of their lengths.
func (r *rotation) findDynamic(probes []int) {
	points := []dynPoint{{L: r.seq, span: r.seq, omega: r.omega}}
	changed := false
	angErr := r.angErr()
	for _, L := range probes {
		pt, ok := r.remeasure(L)
		if !ok {
			continue
		}
		for i, x := range pt.omega {
			// Angles of far positions are known to the rounding of
			// position·frequency.
			far := float64(pt.L) * r.omega[i]
			sig := (angErr+2*far*r.angleEps())/(r.omega[i]*float64(pt.span)) + (angErr+1e-7)/(r.omega[i]*float64(r.seq))
			if math.Abs(x/r.omega[i]-1) > 8*sig+1e-6 {
				changed = true
			}
		}
		points = append(points, pt)
	}
	if changed && probes[len(probes)-1] == 1<<14 {
		if pt, ok := r.remeasure(1 << 16); ok {
			points = append(points, pt)
		}
	}
	if changed {
		slices.SortFunc(points, func(a, b dynPoint) int { return a.L - b.L })
		r.dynamic = points
	}
}

// angleEps is the relative rounding of the angles position·frequency.
func (r *rotation) angleEps() float64 { return relEps(r.halfAngles) }

// sigma is the relative error of frequencies measured over span positions
// up to far (omegaSigma, with the rounding of the angles), and at least
// the rounding of frequencies stored in the rotation's type: a rotation in
// a half type may take them from a half constant (the inv_freq of a
// float16 export), each off base^(-2k/d) by up to 2^-11 of itself, which
// measurements over halfSpan positions resolve. (Angles computed in a half
// type are known to more than that already; float32 frequencies' rounding
// is omegaSigma's.)
func (r *rotation) sigma(omega []float64, angErr float64, span, far int) []float64 {
	s := probe.OmegaSigma(omega, angErr, span, far, r.angleEps())
	for k := range s {
		s[k] = max(s[k], relEps(r.half))
	}
	return s
}

// angErr is the error of a measured angle.
func (r *rotation) angErr() float64 { return max(2e-7, 4*r.noise) }

// relEps is the relative rounding of the type cos/sin angles are
// computed in.
func relEps(half bool) float64 {
	if half {
		return 1.0 / 2048
	}
	return 6e-8
}

// fitDynamic fits dynamic NTK: base' = base·max(1, f·L/orig - (f-1))^(d/(d-2)).
func fitDynamic(w *work.Work, r *rotation, angErr, tol float64) ropeFit {
	if os.Getenv("ONNXPE_DEBUG_ROPE") != "" {
		for _, pt := range r.dynamic {
			fmt.Fprintln(os.Stderr, "dyn", pt.L, pt.omega)
		}
	}
	rd := float64(r.rotaryDim)
	if f, ok := fitLongRoPE(w, r, angErr, tol); ok {
		return f
	}
	var bases []float64
	for _, pt := range r.dynamic {
		sig := r.sigma(pt.omega, angErr, pt.span, pt.L)
		b, f, resid := probe.PlainFit(pt.omega, sig, r.rotaryDim)
		if resid > 8 || math.Abs(f-1) > 8*sig[0]+50*tol {
			return ropeFit{Scaling: "unknown", Base: math.NaN(), Notes: []string{"the frequencies change with the sequence length but not by a base change"}}
		}
		bases = append(bases, b)
	}
	base := slices.Min(bases)
	var xs, ys []float64
	for i, pt := range r.dynamic {
		rr := math.Pow(bases[i]/base, (rd-2)/rd)
		if rr > 1+1e-4 && (!r.half || rr > 1.02) { // half types: noise of 1e-3
			xs = append(xs, float64(pt.L))
			ys = append(ys, rr)
		}
	}
	if len(xs) < 2 {
		return ropeFit{Scaling: "unknown", Base: math.NaN(), Notes: []string{"the frequencies change with the sequence length; too few measurements to fit a rule"}}
	}
	c, a := probe.Linreg(xs, ys)
	factor := 1 - c
	if a <= 0 || factor <= 1 {
		return ropeFit{Scaling: "unknown", Base: math.NaN()}
	}
	orig := factor / a
	// Refine near the original length, where the intercept is well
	// determined: s(L) = f·L/orig - (f-1) at L = 2·orig and 4·orig, read
	// pair by pair against frequencies measured at orig/2 (where s = 1)
	// over as many positions: what the frequencies hold besides
	// base^(-2k/d) (a half type's rounding of stored ones) is the same at
	// both lengths and cancels, where a base fitted at each length takes
	// it differently.
	if r.remeasure != nil && orig >= 2 {
		var rx, ry []float64
		ref, ok := r.remeasure(max(1, int(math.Round(orig/2))))
		for _, L := range []int{int(math.Round(2 * orig)), int(math.Round(4 * orig))} {
			if !ok {
				break
			}
			pt, ok2 := r.remeasure(L)
			if !ok2 {
				break
			}
			sig := r.sigma(pt.omega, angErr, pt.span, pt.L)
			_, _, resid := probe.PlainFit(pt.omega, sig, r.rotaryDim)
			if resid > 8 {
				break
			}
			s, ok3 := r.ntkScale(ref, pt, angErr)
			if !ok3 {
				break
			}
			rx = append(rx, float64(pt.L))
			ry = append(ry, s)
		}
		if len(rx) == 2 {
			c, a = probe.Linreg(rx, ry)
			if a > 0 && 1-c > 1 {
				factor, orig = 1-c, (1-c)/a
			}
		}
	}
	if r.halfAngles {
		factor = probe.Snap(factor, 2e-2) // half angles measure it to a few 1e-3
	} else {
		// Cos/sin only rounded to a half type are measured over spans
		// that resolve their rounding (halfSpan, caches read whole).
		factor = probe.Snap(factor, 1e-3)
	}
	return ropeFit{Base: probe.Snap(base, 5*tol), Scaling: "ntk", Factor: factor, Orig: passes.Ptr(int(math.Round(orig))), Dynamic: true}
}

// ntkScale is the scale s of dynamic NTK between the frequencies of ref
// and of pt, ω_k(pt) = ω_k(ref)·s^(-2k/(d-2)), from every pair but the
// first (which does not turn), weighted by the error of its ratio.
func (r *rotation) ntkScale(ref, pt dynPoint, angErr float64) (float64, bool) {
	sa := probe.OmegaSigma(ref.omega, angErr, ref.span, ref.L, r.angleEps())
	sb := probe.OmegaSigma(pt.omega, angErr, pt.span, pt.L, r.angleEps())
	var sw, sy float64
	for k := 1; k < len(pt.omega) && k < len(ref.omega); k++ {
		if !(pt.omega[k] > 0 && ref.omega[k] > 0) {
			continue
		}
		e := 2 * float64(k) / float64(r.rotaryDim-2)
		sig := (sa[k] + sb[k]) / e // of log s
		wt := 1 / (sig * sig)
		sw += wt
		sy += wt * -math.Log(pt.omega[k]/ref.omega[k]) / e
	}
	if sw == 0 || r.rotaryDim <= 2 {
		return 0, false
	}
	return math.Exp(sy / sw), true
}

// fitLongRoPE recognises frequencies that switch, at one length, from a
// short to a long set (Phi-3's LongRoPE): the switch gives the original
// length, the amplitude sqrt(1 + ln f / ln orig) the factor, and the base
// the graph raises to the exponents turns each set into per-frequency
// factors.
func fitLongRoPE(w *work.Work, r *rotation, angErr, tol float64) (ropeFit, bool) {
	same := func(a, b dynPoint) bool {
		sa := r.sigma(a.omega, angErr, a.span, a.L)
		sb := r.sigma(b.omega, angErr, b.span, b.L)
		for i := range a.omega {
			if math.Abs(a.omega[i]/b.omega[i]-1) > 8*(sa[i]+sb[i])+1e-6 {
				return false
			}
		}
		return true
	}
	pts := r.dynamic
	// Two sets, each over a range of lengths.
	k := 1
	for k < len(pts) && same(pts[0], pts[k]) {
		k++
	}
	if k == len(pts) {
		return ropeFit{}, false
	}
	for _, p := range pts[k:] {
		if !same(pts[k], p) {
			return ropeFit{}, false
		}
	}
	short, long := pts[0], pts[k]
	lo, hi := pts[k-1].L, pts[k].L
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		pt, ok := r.remeasure(mid)
		if !ok {
			return ropeFit{}, false
		}
		if same(pt, long) {
			hi = mid
		} else {
			lo = mid
		}
	}
	orig := hi - 1 // longer than orig positions switch the set
	// The long set measured just past the switch, where positions are
	// small enough to round little.
	if pt, ok := r.remeasure(hi + r.seq); ok && same(pt, long) {
		long = pt
	}
	r.omegaLong = long.omega
	f := ropeFit{Scaling: "longrope", Orig: passes.Ptr(orig), Base: math.NaN()}
	if math.Abs(r.amp-1) > 10*tol {
		f.AttnF = passes.Ptr(snapF32(r.amp))
		factor := math.Exp((r.amp*r.amp - 1) * math.Log(float64(orig)))
		f.Factor = probe.Snap(factor, 1e-3)
	} else {
		f.Factor = math.NaN()
		f.Notes = append(f.Notes, "factor: cos and sin are not scaled, so the factor is not in the graph")
	}
	if r.powBase == 0 {
		f.Notes = append(f.Notes, "base, short_factor, long_factor: the graph stores the frequencies, not the base they were computed from")
		return f, true
	}
	f.Base = r.powBase
	for i := range short.omega {
		plain := math.Pow(f.Base, -2*float64(i)/rd(r))
		f.Short = append(f.Short, snapF32(plain/short.omega[i]))
		f.Long = append(f.Long, snapF32(plain/long.omega[i]))
	}
	return f, true
}

func rd(r *rotation) float64 { return float64(r.rotaryDim) }
