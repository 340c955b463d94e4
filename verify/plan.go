package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Hints are facts about model A that a caller already knows (the audit's
// findings, a user's flags). Roles and MaxPositions take precedence over
// the analysis; Suggested roles only settle what the analysis could not
// (an input with no telling use, which of two tables holds tokens).
type Hints struct {
	// Roles forces the role of named inputs.
	Roles map[string]Role `json:"roles,omitempty"`
	// Suggested are roles another analysis (the audit) found; they are
	// taken for inputs whose use says nothing, or to break a tie between
	// equal tables.
	Suggested map[string]Role `json:"suggested,omitempty"`
	// SuggestedMaxPositions is another analysis' max_positions: a
	// further candidate for the longest sequence (the largest wins).
	SuggestedMaxPositions int `json:"suggested_max_positions,omitempty"`
	// Rows gives the rows of the table an index input reads (the
	// vocabulary of token ids).
	Rows map[string]int `json:"rows,omitempty"`
	// MaxPositions is the number of positions the model supports (the
	// rows of its stored position table or cos/sin cache); 0: analysis.
	MaxPositions int `json:"max_positions,omitempty"`
	// From says where the hints come from, for reports.
	From string `json:"from,omitempty"`
}

// planner builds the sweep of input sets for model A, running A to probe
// what it accepts.
type planner struct {
	a    *Analysis
	opts *Options
	run  func(s SetSpec) (map[string]*kernels.Tensor, error)
	// eval computes named values of A from inputs with A's session
	// (kernels.Session.Eval); nil: the probes open a session of their own.
	eval   func(in map[string]*kernels.Tensor, names []string) (map[string]*kernels.Tensor, error)
	cached map[string]map[string]*kernels.Tensor // A's outputs by set key
	// spill takes the large outputs kept in cached out of memory (nil:
	// they stay); its owner closes it after the last use of cached.
	spill *kernels.Spill
}

// Analyze reads what verify needs to know about a model's inputs from
// its graph and by running it on probe inputs (table sizes, the longest
// sequence it accepts). It is what the sweep is built from; Compare
// calls it on model A.
func Analyze(m *graph.Model, hints Hints, threads int) (*Analysis, error) {
	a := analyzeGraph(m)
	r, err := newGoRunner(m, threads, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	p := &planner{a: a, opts: &Options{Hints: hints, Threads: threads}, cached: map[string]map[string]*kernels.Tensor{}, eval: r.s.Eval}
	p.run = func(s SetSpec) (map[string]*kernels.Tensor, error) {
		set, err := a.synthesize(s, 1)
		if err != nil {
			return nil, err
		}
		return r.run(set.inputs, nil)
	}
	if err := p.analyze(); err != nil {
		return nil, err
	}
	return a, nil
}

// applyHints overrides roles and rows and takes the suggested roles of
// inputs the analysis found no use for; with suggestions, also where
// index inputs tie (noting where suggestions and evidence disagree).
func (a *Analysis) applyHints(h Hints, suggestions bool) {
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if r, ok := h.Suggested[in.Name]; ok && r != in.Role && (suggestions || in.Role == RoleUnknown) {
			by := h.From
			if by == "" {
				by = "another analysis"
			}
			if in.firm || (in.Role != RoleUnknown && !in.tie) {
				note := fmt.Sprintf("%s suggests %s is %s; verify keeps %s (%s)", by, in.Name, r, in.Role, in.Evidence)
				if !slices.Contains(a.Notes, note) {
					a.Notes = append(a.Notes, note)
				}
			} else {
				in.Role, in.Evidence = r, "suggested by "+by+" (the analysis said: "+in.Evidence+")"
			}
		}
		if r, ok := h.Roles[in.Name]; ok && r != in.Role {
			by := h.From
			if by == "" {
				by = "hints"
			}
			in.Role, in.Evidence = r, "given by "+by+" (the analysis said: "+in.Evidence+")"
		}
		if n, ok := h.Rows[in.Name]; ok && n > 0 {
			in.Rows = n
		}
	}
}

// analyze completes the static analysis: probes the tables, tells index
// inputs apart, binds dimensions and finds the longest sequence.
func (p *planner) analyze() error {
	a := p.a
	a.applyHints(p.opts.Hints, false)
	a.assignDims()
	if err := p.probeTables(); err != nil {
		return err
	}
	a.finishRoles()
	a.applyHints(p.opts.Hints, true)
	a.positionBounds()
	a.assignDims()
	a.fixedRows = a.fixedBatch()
	if err := p.findMaxLength(); err != nil {
		return err
	}
	rows := false
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePositionIDs {
			continue
		}
		if !a.hasRows(in) && a.batched() {
			a.Notes = append(a.Notes, fmt.Sprintf("position input %q has no batch axis: every row of a batch has the same positions (a model reading one row's positions for all is not told apart)", in.Name))
		}
		rows = rows || a.hasRows(in)
	}
	if rows && !a.hasRole(RoleAttentionMask) && !a.ragged() {
		for _, in := range a.Inputs {
			if in.Role == RolePastLength {
				a.Notes = append(a.Notes, fmt.Sprintf("past-length input %q is one count for every row: the rows of a single token (after a past or not) have the same positions, where it says they start (a model reading one row's positions for all is not told apart on those sets)", in.Name))
			}
		}
	}
	return nil
}

func hasBatchAxis(in *InputInfo) bool {
	return slices.ContainsFunc(in.Dims, func(d DimSpec) bool { return d.Kind == DimBatch })
}

// hasRows reports whether position input in has an axis of the batch's
// rows: an open batch axis (axis 1 of M-RoPE's streams) or a fixed batch
// (fixedBatch).
func (a *Analysis) hasRows(in *InputInfo) bool {
	return hasBatchAxis(in) || a.rowAxis(in)
}

// batched reports whether the model takes rows of a batch: an open batch
// axis, or a fixed one of two rows or more on an input whose axis 0
// assignDims takes as the batch.
func (a *Analysis) batched() bool {
	if a.hasDim(DimBatch) || a.fixedRows > 0 {
		return true
	}
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if batchLed(in) && in.Dims[0].Kind == DimFixed && in.Dims[0].Size >= 2 {
			return true
		}
	}
	return false
}

// withFixedBatch gives a set of a model that fixes its batch
// (fixedBatch) that many rows: its inputs have them whatever the set
// says.
func (a *Analysis) withFixedBatch(s SetSpec) SetSpec {
	if a.fixedRows > 0 {
		s.Batch = a.fixedRows
	}
	return s
}

// rowStep is how far apart the positions of consecutive rows start where
// the planner shifts rows (rowPositions).
const rowStep = 5

// rowPositions gives the rows of a batch of two or more different
// positions where nothing else the set feeds fixes them, as deployments
// batch rows at different places: a model (or a rewrite) reading one
// row's positions for every row must differ. Every position input must
// have a batch axis, open or fixed (fixedBatch; else rows cannot differ:
// analyze notes it); row 0
// keeps its positions (it reaches the set's largest one), and padded rows
// keep those their mask or history gives them (they differ already).
//
//   - Several tokens and no past (or a past whose length one
//     past-length input gives for all rows, without a mask or static
//     caches: rows start where it says): each other whole row repeats 1, 2, ...
//     positions from its middle token on (tokens sharing a position, as a
//     speculative decoder's tree candidates do), so that its later tokens
//     sit behind row 0's. A uniform shift would not do: RoPE sees only
//     the distances between a row's tokens, and without a past no other
//     token is there to see it. The positions never decrease along a row
//     and stay at or below row 0's, so no table is read past its end and
//     the first position where outputs differ still names the cause. A
//     mask of ones (Hugging Face's cumsum(mask) - 1 stands only for
//     position ids not given), a static cache written from slot 0 (its
//     slots are not the positions) and images on a grid are not
//     contradicted; M-RoPE's streams get no repeats (their rows differ by
//     the images in every other row).
//   - A past, or a single token: row b's positions start b·rowStep
//     later (earlier when the largest position the model allows leaves
//     no room above): histories of different lengths. Cached keys are
//     given, so a shifted row computes differently under RoPE too. Not
//     with a mask, static caches or a past-length input: they say where
//     each row's positions start (a mask's padding, the tokens a row
//     holds, one count for all rows: analyze notes that a single
//     token's rows then have the same positions).
func (p *planner) rowPositions(s SetSpec) SetSpec {
	a := p.a
	s = a.withFixedBatch(s)
	if s.Batch < 2 || s.image {
		return s
	}
	pos, streams := 0, false
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePositionIDs {
			continue
		}
		if !a.hasRows(in) {
			return s
		}
		pos++
		streams = streams || streamInput(in)
	}
	if pos == 0 {
		return s
	}
	whole := func(b int) bool { return s.Pads == 0 || b >= len(s.Padding) || s.Padding[b] == "none" }
	// One past length for all rows (and no mask or static caches to say
	// otherwise) fixes where every row starts after a past, not how its
	// tokens follow.
	oneStart := a.hasRole(RolePastLength) && !a.hasRole(RoleAttentionMask) && !a.ragged()
	if (s.Past == 0 || oneStart) && s.Seq >= 2 && !streams {
		repeats := make([]int, s.Batch)
		r, any := 0, false
		for b := 1; b < s.Batch; b++ {
			// More repeats than the tokens after the middle one would
			// give the row of the previous count.
			if whole(b) && r < s.Seq-s.Seq/2 {
				r++
				repeats[b], any = r, true
			}
		}
		if any {
			s.RowRepeats = repeats
		}
		return s
	}
	if a.hasRole(RoleAttentionMask) || a.ragged() || a.hasRole(RolePastLength) {
		return s
	}
	top := s.Offset + s.Past + s.Seq - 1
	limit := a.MaxPosition
	if limit <= 0 {
		// Positions index a table cut to the sequence: none above it.
		limit = top
	}
	step, sign := 0, 1
	if up := limit - top; up >= s.Batch-1 {
		step = min(rowStep, up/(s.Batch-1))
	} else if down := s.Offset + s.Past; down >= s.Batch-1 {
		step, sign = min(rowStep, down/(s.Batch-1)), -1
	}
	if step == 0 {
		return s
	}
	s.RowOffsets = make([]int, s.Batch)
	for b := range s.RowOffsets {
		if whole(b) {
			s.RowOffsets[b] = sign * b * step
		}
	}
	return s
}

// probeTables runs A at two short lengths, reading the tables the model
// indexes by positions, to learn their sizes.
func (p *planner) probeTables() error {
	a := p.a
	var names []string
	for _, r := range a.reads {
		if r.data.Name == "" || r.static {
			continue
		}
		names = append(names, r.data.Name)
		if r.slice && r.node.Output(0).Name != "" {
			names = append(names, r.node.Output(0).Name)
		}
	}
	names = dedupe(names)
	lens := [2]int{2, 3}
	if a.FixedSeq > 0 {
		lens = [2]int{a.FixedSeq, a.FixedSeq}
	}
	// The probes evaluate the values they read with A's session (only
	// the steps those values need); a session of their own, which
	// returns them as outputs, only when A's cannot (a value inside a
	// fused attention step).
	eval := p.eval
	var probe *goRunner
	openProbe := func() error {
		var err error
		probe, err = newGoRunner(a.model, p.opts.Threads, names)
		if err != nil {
			return &ModelError{Model: "A", Runtime: RuntimeGo, Err: err}
		}
		eval = func(in map[string]*kernels.Tensor, _ []string) (map[string]*kernels.Tensor, error) {
			return probe.run(in, nil)
		}
		return nil
	}
	defer func() {
		if probe != nil {
			probe.close()
		}
	}()
	if len(names) > 0 && eval == nil {
		if err := openProbe(); err != nil {
			return err
		}
	}
	for k, n := range lens {
		if len(names) == 0 {
			break
		}
		if k == 1 && (lens[1] == lens[0] || !a.hasSeq()) {
			// The shapes are fixed: the second probe would read the same.
			for _, r := range a.reads {
				if !r.static {
					r.rows[1] = r.rows[0]
				}
			}
			break
		}
		spec := SetSpec{Name: fmt.Sprintf("probe (sequence %d)", n), Batch: 1, Seq: n}
		set, err := a.synthesize(spec, 1)
		if err != nil {
			return err
		}
		out, err := eval(set.inputs, names)
		if errors.Is(err, kernels.ErrNotComputed) && probe == nil {
			if err := openProbe(); err != nil {
				return err
			}
			out, err = eval(set.inputs, names)
		}
		if err != nil {
			return &ModelError{Model: "A", Runtime: RuntimeGo, Set: spec.Name, Err: err}
		}
		for _, r := range a.reads {
			d := out[r.data.Name]
			if d == nil || r.static {
				continue
			}
			if r.slice {
				o := out[r.node.Output(0).Name]
				if o == nil || len(o.Shape) != len(d.Shape) {
					continue
				}
				for ax := range d.Shape {
					if d.Shape[ax] != o.Shape[ax] {
						r.axis = ax
						break
					}
				}
				if r.axis < 0 {
					continue
				}
			}
			ax := r.axis
			if ax < 0 {
				ax += len(d.Shape)
			}
			if ax >= 0 && ax < len(d.Shape) {
				r.rows[k] = d.Shape[ax]
				if k == 0 {
					r.value = d
				}
			}
		}
	}
	return nil
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// findMaxLength sets MaxLength: the largest stored table's rows (or
// DefaultLongSequence when larger or when there is none), lowered by
// bisection to the longest sequence A runs when A refuses it.
func (p *planner) findMaxLength() error {
	a := p.a
	a.Tables = nil
	longest, from := 0, ""
	for _, r := range a.reads {
		if r.token || r.rows[0] == 0 {
			continue
		}
		t := Table{Value: r.data.Name, Node: r.node.Name, Op: r.node.OpType, Rows: r.rows[0], BySequence: r.rows[0] != r.rows[1]}
		a.Tables = append(a.Tables, t)
		if !t.BySequence && t.Rows > longest {
			longest, from = t.Rows, fmt.Sprintf("table %q read by %s (%d rows)", t.Value, t.Op, t.Rows)
		}
	}
	if h := p.opts.Hints.SuggestedMaxPositions; h > longest {
		longest, from = h, fmt.Sprintf("%d positions, suggested by %s", h, p.opts.Hints.From)
	}
	if h := p.opts.Hints.MaxPositions; h > 0 {
		longest, from = h, fmt.Sprintf("given: %d positions", h)
		if p.opts.Hints.From != "" {
			from = p.opts.Hints.From
		}
	}
	// Positions: the largest a table indexed by position ids allows,
	// DefaultFarPosition when they feed a computed encoding.
	a.MaxPosition = 0
	for i := range a.Inputs {
		in := &a.Inputs[i]
		if in.Role != RolePositionIDs {
			continue
		}
		mp := in.MaxPosition
		if p.opts.Hints.MaxPositions > 0 {
			mp = p.opts.Hints.MaxPositions - 1
		}
		if mp == 0 && !a.readsBySequence(in) {
			mp = DefaultFarPosition
		}
		if mp > 0 && (a.MaxPosition == 0 || mp < a.MaxPosition) {
			a.MaxPosition = mp
		}
	}
	if a.FixedSeq > 0 {
		a.MaxLength, a.MaxLengthFrom = a.FixedSeq, "fixed by the model's input shapes"
		return nil
	}
	if !a.hasSeq() {
		a.MaxLengthFrom = "the inputs have no sequence axis"
		return nil
	}
	if longest < DefaultLongSequence && p.opts.Hints.MaxPositions == 0 {
		if longest > 0 {
			from = fmt.Sprintf("default (the largest stored table, %s, is shorter)", from)
		} else {
			from = "default (no stored table bounds positions)"
		}
		longest = DefaultLongSequence
	}
	limit := p.opts.MaxLength
	if limit <= 0 {
		limit = DefaultMaxLength
	}
	if longest > limit {
		a.Notes = append(a.Notes, fmt.Sprintf("the model supports %d positions (%s); the sweep stops at %d (raise it with a longer --seq)", longest, from, limit))
		longest, from = limit, fmt.Sprintf("capped at %d", limit)
	}
	if p.run == nil {
		a.MaxLength, a.MaxLengthFrom = longest, from
		return nil
	}
	try := func(n int) (bool, error) {
		// The rows as the sweep's long set has them: its run is kept.
		s := p.rowPositions(SetSpec{Name: fmt.Sprintf("probe (sequence %d)", n), Batch: longRows(n), Seq: n, Purpose: "long"})
		out, err := p.run(s)
		if err != nil {
			if errors.Is(err, kernels.ErrInternal) {
				return false, &ModelError{Model: "A", Runtime: RuntimeGo, Set: s.Name, Err: err}
			}
			return false, nil
		}
		p.cached[s.key()] = p.spill.Outputs(out)
		return true, nil
	}
	ok, err := try(longest)
	if err != nil {
		return err
	}
	if ok {
		a.MaxLength, a.MaxLengthFrom = longest, from
		return nil
	}
	// Refused: try the stored tables' sizes, longest first, then bisect
	// below the shortest refused length.
	hi := longest
	var sizes []int
	for _, t := range a.Tables {
		if !t.BySequence && t.Rows < hi && !slices.Contains(sizes, t.Rows) {
			sizes = append(sizes, t.Rows)
		}
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	for _, n := range sizes {
		ok, err := try(n)
		if err != nil {
			return err
		}
		if ok {
			a.MaxLength = n
			a.MaxLengthFrom = fmt.Sprintf("the size of a stored table (%d rows); %d is refused", n, hi)
			return nil
		}
		hi = n
	}
	lo := 1
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	a.MaxLength, a.MaxLengthFrom = lo, fmt.Sprintf("the longest sequence model A runs (from %d on it refuses inputs)", hi)
	return nil
}

// readsBySequence reports whether position input in indexes a table cut
// to the sequence length (positions must then stay below it).
func (a *Analysis) readsBySequence(in *InputInfo) bool {
	for _, n := range in.ev.gathers {
		if r := a.readOf(n); r != nil && r.rows[0] != r.rows[1] {
			return true
		}
	}
	return false
}

// specs lists the input sets of the sweep.
func (p *planner) specs() []SetSpec {
	a, o := p.a, p.opts
	mask := a.hasRole(RoleAttentionMask)
	ragged := !mask && a.ragged()
	padded := func(s SetSpec) SetSpec {
		s = a.withFixedBatch(s)
		switch {
		case mask && s.Batch >= 2 && !s.unpadded:
			s.Padding = []string{"none", "left", "right"}[:min(s.Batch, 3)]
			for len(s.Padding) < s.Batch {
				s.Padding = append(s.Padding, "none")
			}
			s.Pads = min(2, s.Past+s.Seq-1)
		case ragged && s.Batch >= 2 && !s.unpadded && s.Past > 0:
			// Static caches without a mask: a padded row holds fewer
			// cached tokens (the start of its history is missing).
			s.Padding = make([]string, s.Batch)
			for b := range s.Padding {
				s.Padding[b] = []string{"none", "left"}[b%2]
			}
			s.Pads, s.history = min(2, s.Past), true
		}
		return s
	}
	var out []SetSpec
	add := func(s SetSpec) {
		if a.OneRowChunks != "" && s.Past > 0 && s.Seq > 1 {
			s.Batch, s.Purpose = 1, strings.TrimSuffix(s.Purpose, ", padded rows")+", one sequence ("+a.OneRowChunks+")"
			out = append(out, s)
			return
		}
		if len(o.Batches) > 0 {
			for _, b := range o.Batches {
				t := s
				t.Batch = b
				t.Padding = nil
				t = p.rowPositions(padded(t))
				if len(o.Batches) > 1 {
					t.Name = fmt.Sprintf("%s/b%d", s.Name, b)
				}
				out = append(out, t)
			}
			return
		}
		out = append(out, p.rowPositions(padded(s)))
	}
	if !a.hasSeq() {
		if !a.hasDim(DimBatch) {
			// Every size is fixed: one set.
			if a.fixedRows > 0 {
				// Position ids [batch, sequence] of fixed sizes: their rows
				// at positions of their own, unpadded (outputs have no
				// declared axes to tell padding tokens by).
				return []SetSpec{p.rowPositions(SetSpec{Name: "fixed", Seq: a.FixedSeq, Purpose: "the model's fixed shapes", required: true, unpadded: true})}
			}
			return []SetSpec{padded(SetSpec{Name: "fixed", Batch: 3, Purpose: "the model's fixed shapes", required: true})}
		}
		if a.hasDim(DimImageRows) || a.hasDim(DimImageCols) {
			// Images of open size: grids of patches of one row, of a few
			// rows and columns, and a large one. 2-D RoPE turns some pairs
			// with a patch's row: a set of one row never turns them.
			for i, g := range []struct{ batch, patches int }{{1, imageSmall}, {3, imageMedium}, {1, imageLarge}} {
				r, c := patchGrid(g.patches)
				add(SetSpec{Name: fmt.Sprintf("grid%dx%d", r, c), Batch: g.batch, Seq: g.patches, image: true, required: i == 0,
					Purpose: fmt.Sprintf("images of %d x %d patches", r, c)})
			}
			return dedupeSpecs(out)
		}
		add(SetSpec{Name: "batch1", Batch: 1, Purpose: "one example", required: true})
		add(SetSpec{Name: "batch3", Batch: 3, Purpose: "a batch"})
		return dedupeSpecs(out)
	}
	fix := func(n int) int {
		if a.FixedSeq > 0 {
			return a.FixedSeq
		}
		return n
	}
	if len(o.Seqs) > 0 {
		for i, n := range o.Seqs {
			b := 2
			if n > 64 {
				b = 1
			}
			add(SetSpec{Name: fmt.Sprintf("seq%d", n), Batch: b, Seq: fix(n), Purpose: "requested length", required: i == 0 && !a.HasCache})
			if a.HasCache {
				add(SetSpec{Name: fmt.Sprintf("seq%d-past%d", n, decodePast), Batch: b, Seq: fix(n), Past: decodePast, Purpose: "requested length after a KV cache", required: i == 0})
			}
		}
	} else {
		if a.HasCache {
			add(SetSpec{Name: "decode", Batch: 2, Seq: fix(1), Past: decodePast, Purpose: "one token after a KV cache", required: true})
			add(SetSpec{Name: "chunk", Batch: 2, Seq: fix(4), Past: 5, Purpose: "a few tokens after a KV cache, padded rows"})
		}
		add(SetSpec{Name: "token", Batch: 2, Seq: fix(1), Purpose: "a single token", required: !a.HasCache})
		add(SetSpec{Name: "short", Batch: 3, Seq: fix(shortSeq), Purpose: "a short sequence, padded rows", required: !a.HasCache})
		if a.MaxLength > shortSeq {
			add(SetSpec{Name: "long", Batch: longRows(fix(a.MaxLength)), Seq: fix(a.MaxLength), Purpose: "the longest sequence (" + a.MaxLengthFrom + ")", unpadded: true})
		}
		// Each stored table shorter than the longest sequence, read up
		// to its last row (a model may switch to another path beyond it).
		var edges []int
		for _, t := range a.Tables {
			if !t.BySequence && t.Rows > shortSeq && t.Rows < a.MaxLength && !slices.Contains(edges, t.Rows) {
				edges = append(edges, t.Rows)
			}
		}
		slices.Sort(edges)
		for _, n := range edges {
			add(SetSpec{Name: fmt.Sprintf("table%d", n), Batch: longRows(fix(n)), Seq: fix(n), unpadded: true,
				Purpose: fmt.Sprintf("a sequence as long as a stored table (%d rows)", n)})
		}
		if a.HasCache && a.MaxLength > decodePast+1 {
			add(SetSpec{Name: "decode-last", Batch: 1, Seq: fix(1), Past: a.MaxLength - 1, Purpose: "one token at the last position, after a KV cache"})
		}
	}
	if a.hasRole(RolePositionIDs) && a.MaxPosition > 0 && a.MaxPosition+1 > a.MaxLength {
		n := fix(min(shortSeq, a.MaxPosition+1))
		out = append(out, p.rowPositions(SetSpec{Name: "far", Batch: 2, Seq: n, Offset: a.MaxPosition + 1 - n,
			Purpose: fmt.Sprintf("positions up to %d, the largest the model supports", a.MaxPosition)}))
	}
	return dedupeSpecs(out)
}

// longRows is the rows of the long sets of n positions: two up to
// DefaultMaxLength (the second row's positions repeat, which a model
// that counts them from the sequence gets wrong, and a perturbation one
// row leaves under the tolerance shows in the other); one beyond, the
// lengths extend checks, where a second row doubles the activations,
// the [heads, n, n] scores of a model that computes them whole, and the
// time, for what the shorter sets' rows show already.
func longRows(n int) int {
	if n > DefaultMaxLength {
		return 1
	}
	return 2
}

func dedupeSpecs(in []SetSpec) []SetSpec {
	var out []SetSpec
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s.key()] {
			seen[s.key()] = true
			out = append(out, s)
		}
	}
	return out
}
