package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/verify"
	"github.com/spf13/cobra"
)

type rewriteOptions struct {
	IO           *IOStreams
	In, Out      string
	Passes       []string
	NoVerify     bool
	Overwrite    bool // --overwrite-side-files
	DryRun       bool
	JSON         bool
	MaxPositions int
	RoPEOp       string
	ALiBi        string
	T5Op         string
	Attention    string
	AddKVCache   bool
	Unfuse       bool
	Seed         uint64
	Threads      int
	ctx          context.Context

	// tamper, set by tests, changes the rewritten model before it is
	// verified (to check that a rewrite that is not equal is refused).
	tamper func(*graph.Model)
}

// NewCmdRewrite builds `onnxpe rewrite`.
func NewCmdRewrite(ios *IOStreams) *cobra.Command {
	opts := &rewriteOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "rewrite IN -o OUT [flags]",
		Short: "Precompute positional encodings and fuse RoPE/ALiBi, proven equal before writing",
		Long: `Rewrite replaces the positional-encoding subgraphs the audit finds by
precomputed constants or fused nodes, checks that the result computes the
same outputs as IN, and writes it to OUT.

Passes (--passes, all by default, in this order):
` + rewritePassesHelp() + `DeBERTa's relative positions without buckets (q - k and a Clip) are left:
a table would only replace the Clip by a Gather; the report says so.
--unfuse instead lowers fused RotaryEmbedding (both domains), the rotary
of GroupQueryAttention and ALiBiBias back to primitive ops, for runtimes
without them.

--attention fused rewrites whole attention blocks, not only their
encodings: each RoPE decoder block (q·kᵀ, scale, masks, Softmax, ·v, with
its rotation, the repeat of grouped KV heads and the concatenation with a
KV cache) becomes one com.microsoft GroupQueryAttention node, as ONNX
Runtime GenAI's models have it: do_rotary (half-split or interleaved) with
the cos/sin caches the rope pass computes from the model's own values, the
projections as [batch, seq, heads*head] rows, past/present KV in the op's
[batch, kv_heads, seq, head] layout, the causal mask the op's own and a
padding mask (one that depends on an attention_mask input, [batch, 1,
queries or 1, keys]) its attention_bias, position_ids given (RotaryEmbedding
before the op) unless the positions are the op's own (0..S-1, or after the
cache) and the rotation's caches have a multiple of 8 columns (ONNX
Runtime's op refuses others). With --rope-op onnx the block becomes the
standard ops of opset 23 instead: RotaryEmbedding on the q and k rows at
the model's position_ids, then Attention (q_num_heads, kv_num_heads,
is_causal, the padding mask as attn_mask, past_key/past_value and
present_key/present_value in the same layout); the model's opset is
raised to 23. The causal mask may be added, or be
a Where on the scores that keeps the visible keys' scores (GPT-J,
GPT-NeoX), found on numbers to hide exactly the keys after each query's.
Each block is run both ways on numbers before it is fused. A block the op
cannot express is left as it is, its rotation fused into RotaryEmbedding,
and the report says why per block: scores of rank 3 that are not viewed
as [batch, heads, queries, keys] before the Softmax, a norm of q or k
after the rotation (Llama 4), cos/sin that depend on more than the
positions (dynamic NTK), no causal mask, two masks that depend on inputs,
a check on numbers that fails (KV heads repeated in another order). With
--rope-op onnx the blocks whose scores an ALiBi or T5 bias reaches
(BLOOM, MPT, T5, mT5, UMT5) are fused too: Attention of opset 23 whose
attn_mask is the bias with the model's masks (a Where that masks by an
attention_mask's values becomes an additive mask; BLOOM's bias of
[batch*heads, 1, keys], added to scores of that shape, is viewed as
[batch, heads, 1, keys]), is_causal only when the block masks causally
apart from the bias (a T5 encoder does not); GroupQueryAttention takes no
such block. The other schemes keep their blocks. A
rewritten model with a cache runs several new tokens after it for one
sequence only (the op's contract; verify's sweep does so). The default is
keep.

--add-kv-cache (with --attention fused) gives a model exported without a
KV cache one, so that it decodes token by token as ONNX Runtime GenAI's
models do: every fused op takes past_key_values.L.key/value [batch,
kv_heads, past_sequence_length, head] and returns present.L.key/value
(past and new tokens); attention_mask then covers past and new tokens
([batch, total_sequence_length]): the block's padding mask is read from it
again, after checking on numbers that the model's masks hide exactly the
keys it marks 0; position_ids, when the model takes them, are the new
tokens' (past + i); positions the graph counts from 0 count from the
cache's length instead (do_rotary does so itself).
It is refused, and nothing written (exit 1), when a block is not fused
(the notes say why), when the attention mask is read outside the blocks,
when the audit finds another encoding than RoPE (a learned table read at
0..S-1 in every call), or when the model has a cache. The check before writing runs each of
verify's sets through the rewrite as a prompt and then one token at a
time with its caches fed back, against IN on the whole prompt.

Every node outside the encodings is kept as it was; nodes the rewrite
leaves unused are removed. Before writing, both models run onnxpe verify's
sweep (positions up to the largest the model supports, KV-cache steps):
a rewrite that is not equal within the tolerance is not written (exit 1,
with the verify report). --no-verify skips the check (models too large to
run here); --dry-run reports and writes nothing. A model with nothing to
rewrite is written unchanged. External data stays external: with side
files, the output's tensors (new tables too) go to OUT.data.

` + sideFilesHelp + `

Exit codes:
  0  rewritten and proven equal, or nothing rewritten (IN written
     unchanged; findings a pass leaves are listed with the reason)
  1  the rewritten model is not equal to IN, --add-kv-cache cannot give
     it a cache, or the rewrite cannot be verified (onnxpe's kernels cannot run IN, e.g. an op they lack: the
     line names it; --no-verify writes it unchecked): nothing was written
  2  usage error, unreadable input
  3  internal error (a bug: please report it)
` + exitInterruptedHelp,
		Example: `  onnxpe rewrite model.onnx -o model_pe.onnx
  onnxpe rewrite model.onnx -o model_pe.onnx --rope-op onnx --max-positions 8192
  onnxpe rewrite model.onnx -o model_pe.onnx --passes rope,alibi --json
  onnxpe rewrite model.onnx -o model_gqa.onnx --attention fused
  onnxpe rewrite model.onnx -o model_kv.onnx --attention fused --add-kv-cache
  onnxpe rewrite fused.onnx -o plain.onnx --unfuse
  onnxpe rewrite fused_ms.onnx -o fused_onnx.onnx --rope-op onnx
  onnxpe rewrite big.onnx -o big_pe.onnx --no-verify
  onnxpe rewrite model.onnx --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.In = args[0]
			opts.ctx = cmd.Context()
			return rewriteRun(opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Out, "output", "o", "", "write the rewritten model to `OUT`")
	f.StringSliceVar(&opts.Passes, "passes", nil, "rewrite passes to run: "+strings.Join(rewritePassNames(), ", ")+" (default: all)")
	f.BoolVar(&opts.Overwrite, overwriteSideFilesFlag, false, overwriteSideFilesUsage)
	f.BoolVar(&opts.NoVerify, "no-verify", false, "write without checking that the rewritten model computes the same outputs")
	f.BoolVar(&opts.DryRun, "dry-run", false, "report what would change; write nothing")
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.IntVar(&opts.MaxPositions, "max-positions", 0, "positions of the caches and tables written (default: the model's table size, else 4096)")
	f.StringVar(&opts.RoPEOp, "rope-op", "", "RotaryEmbedding to emit: com.microsoft (default) or onnx (opset 23); given, it also converts fused nodes of the other domain")
	f.StringVar(&opts.ALiBi, "alibi", passes.ALiBiFold, "ALiBi: fold (constants) or fuse (ai.onnxpe ALiBiBias)")
	f.StringVar(&opts.T5Op, "t5-op", passes.T5Table, "T5 bias: table (gathered, runs on ONNX Runtime's CPU) or com.microsoft (RelativePositionBias: ONNX Runtime has it on CUDA only)")
	f.StringVar(&opts.Attention, "attention", passes.AttentionKeep, "attention blocks: keep (as they are) or fused (RoPE decoder blocks -> com.microsoft GroupQueryAttention where it expresses them)")
	f.BoolVar(&opts.AddKVCache, "add-kv-cache", false, "with --attention fused: give a model exported without a KV cache one (past/present inputs and outputs per layer), checked prompt-then-decode against the full prompt")
	f.BoolVar(&opts.Unfuse, "unfuse", false, "lower fused RotaryEmbedding, GroupQueryAttention's rotary and ALiBiBias to primitive ops")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the values verify synthesises")
	f.IntVar(&opts.Threads, "threads", 0, "goroutines of onnxpe's kernels when verifying (0: all cores)")
	return cmd
}

// rewriteReport is what `onnxpe rewrite --json` prints.
type rewriteReport struct {
	Model   string            `json:"model"`
	Output  string            `json:"output,omitempty"`
	Changed bool              `json:"changed"`
	Written bool              `json:"written"`
	Changes []*rewrite.Change `json:"changes"`
	Verify  *verify.Report    `json:"verify,omitempty"`
	Notes   []string          `json:"notes,omitempty"`
	Summary string            `json:"summary"`
	Options map[string]string `json:"options"`
}

func rewriteRun(opts *rewriteOptions) error {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.Out == "" && !opts.DryRun {
		return badInput("rewrite: give -o OUT (or --dry-run)")
	}
	if opts.Attention == "" {
		opts.Attention = passes.AttentionKeep
	}
	ro := passes.RewriteOptions{MaxPositions: opts.MaxPositions, RoPEOp: opts.RoPEOp, ALiBi: opts.ALiBi, T5Op: opts.T5Op, Attention: opts.Attention, AddKVCache: opts.AddKVCache}
	if opts.ALiBi == "" {
		opts.ALiBi = passes.ALiBiFold
	}
	if opts.T5Op == "" {
		opts.T5Op = passes.T5Table
	}
	switch {
	case opts.MaxPositions < 0:
		return badInput("rewrite: --max-positions must not be negative (0: the model's table size, else 4096)")
	case opts.Threads < 0:
		return badInput("rewrite: --threads must not be negative (0: all cores)")
	case opts.Unfuse && (len(opts.Passes) > 0 || opts.RoPEOp != ""):
		return badInput("rewrite: --unfuse lowers the fused ops; it takes no --passes or --rope-op")
	case opts.RoPEOp != "" && opts.RoPEOp != passes.RoPEOpMicrosoft && opts.RoPEOp != passes.RoPEOpONNX:
		return badInput("rewrite: --rope-op must be com.microsoft or onnx, not %q", opts.RoPEOp)
	case opts.ALiBi != passes.ALiBiFold && opts.ALiBi != passes.ALiBiFuse:
		return badInput("rewrite: --alibi must be fold or fuse, not %q", opts.ALiBi)
	case opts.T5Op != passes.T5Table && opts.T5Op != passes.T5Microsoft:
		return badInput("rewrite: --t5-op must be table or com.microsoft, not %q", opts.T5Op)
	case opts.Attention != passes.AttentionKeep && opts.Attention != passes.AttentionFused:
		return badInput("rewrite: --attention must be keep or fused, not %q", opts.Attention)
	case opts.Attention == passes.AttentionFused && opts.Unfuse:
		return badInput("rewrite: --attention fused writes fused attention ops; it takes no --unfuse")
	case opts.AddKVCache && opts.Attention != passes.AttentionFused:
		return badInput("rewrite: --add-kv-cache gives the fused attention ops a cache: it needs --attention fused")
	}
	var ps []*passes.Pass[*rewrite.Change]
	if opts.Unfuse {
		ps = []*passes.Pass[*rewrite.Change]{schemes.Unfuse}
	} else if len(opts.Passes) == 0 {
		ps = schemes.Rewriters()
	} else {
		for _, name := range opts.Passes {
			p := schemes.Rewriter(strings.TrimSpace(name))
			if p == nil {
				names := rewritePassNames()
				slices.Sort(names)
				return badInput("rewrite: unknown pass %q (passes: %s)", name, strings.Join(names, ", "))
			}
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
	}
	m, err := loadModelInto(opts.IO, opts.In, opts.Out, opts.Overwrite)
	if err != nil {
		return err
	}
	// The model is audited once: the rewrite passes run in the audit's
	// context, and verify's hints come from it.
	arep, actx, err := audit.AuditModel(m, opts.In, passes.Options{Rewrite: ro})
	if err != nil {
		if errors.Is(err, rewrite.ErrRewrite) || errors.Is(err, work.ErrModel) {
			return badInput("rewrite %s: %v", opts.In, err)
		}
		return err
	}
	if opts.MaxPositions > 0 {
		// The tables of --max-positions N, against the memory budget,
		// before the rewrite computes them.
		if err := checkPositionsMemory("--max-positions", arep, int64(opts.MaxPositions), false); err != nil {
			return err
		}
	}
	rw, err := rewrite.Run(actx, ps...)
	if err != nil {
		if errors.Is(err, rewrite.ErrRewrite) || errors.Is(err, work.ErrModel) {
			return badInput("rewrite %s: %v", opts.In, err)
		}
		return err
	}
	rep := &rewriteReport{Model: opts.In, Output: opts.Out, Changed: rw.Changed(), Changes: rw.Changes,
		Options: map[string]string{"rope_op": cmp.Or(opts.RoPEOp, passes.RoPEOpMicrosoft), "alibi": opts.ALiBi, "t5_op": opts.T5Op, "max_positions": fmt.Sprint(opts.MaxPositions), "attention": opts.Attention,
			"add_kv_cache": fmt.Sprint(opts.AddKVCache)}}
	if opts.AddKVCache {
		// Every block must have taken a cache, and nothing outside them
		// read the prompt's length: else the model cannot decode.
		if why := rw.FinishKVCache(len(passes.Result(actx, attn.Blocks)), arep.Findings); why != "" {
			rep.Summary = "--add-kv-cache: " + why + "; nothing written"
			if err := printRewrite(opts, rep); err != nil {
				return err
			}
			return &checkFailed{msg: rep.Summary}
		}
	}
	if opts.tamper != nil {
		opts.tamper(rw.M)
	}
	verified := false
	if rep.Changed && !opts.NoVerify {
		vo := verify.Options{Seed: opts.Seed, PathA: opts.In, PathB: "rewritten " + filepath.Base(opts.In), Threads: opts.Threads}
		vo.Hints = verify.HintsFromAudit(arep, actx)
		prog := newProgress(opts.IO)
		vo.Progress = prog.update
		vr, err := verify.Compare(ctx, m, rw.M, vo)
		prog.done()
		if err != nil {
			if errors.Is(err, kernels.ErrInternal) {
				return err
			}
			var me *verify.ModelError
			if errors.As(err, &me) && me.Model == "B" {
				rep.Summary = "the rewritten model does not run: " + oneLine(err.Error()) + "; nothing written"
				if err := printRewrite(opts, rep); err != nil {
					return err
				}
				return &checkFailed{msg: rep.Summary}
			}
			// IN itself does not run here (an op onnxpe has no kernel
			// for, ATen): the rewrite cannot be proven equal. Not bad
			// input: a check that cannot pass.
			rep.Summary = "the rewrite cannot be verified: " + oneLine(err.Error()) + "; nothing written (--no-verify writes it unchecked)"
			if err := printRewrite(opts, rep); err != nil {
				return err
			}
			return &checkFailed{msg: rep.Summary}
		}
		rep.Verify = vr
		if !vr.Equal {
			rep.Summary = "the rewritten model is not equal to " + opts.In + ": " + vr.Summary + "; nothing written"
			if err := printRewrite(opts, rep); err != nil {
				return err
			}
			return &checkFailed{msg: rep.Summary}
		}
		verified = true
	}
	switch {
	case opts.DryRun:
	case !rep.Changed:
		if err := commit(ctx, opts.Out, func() error { return m.Save(opts.Out, graph.SaveOptions{Context: ctx}) }); err != nil {
			return badInput("%s: %v", opts.Out, err)
		}
		rep.Written = true
	default:
		if err := commit(ctx, opts.Out, func() error { return saveRewritten(ctx, m, rw.M, opts.Out) }); err != nil {
			return badInput("%s: %v", opts.Out, err)
		}
		rep.Written = true
	}
	switch {
	case !rep.Changed:
		rep.Summary = "nothing to rewrite"
		left := 0
		for _, ch := range rep.Changes {
			left += len(ch.Skipped)
		}
		if left > 0 {
			// Findings a pass refused (the lines above say why): not
			// "nothing to rewrite".
			rep.Summary = fmt.Sprintf("nothing rewritten (%d finding(s) left, see 'not rewritten')", left)
		}
		if rep.Written {
			rep.Summary += ": " + opts.Out + " is " + opts.In + " unchanged"
		}
	default:
		var parts []string
		for _, ch := range rep.Changes {
			if len(ch.Added)+len(ch.Removed) > 0 {
				parts = append(parts, strings.TrimPrefix(ch.Pass, "rewrite_"))
			}
		}
		rep.Summary = "rewrote " + strings.Join(parts, ", ")
		if verified {
			rep.Summary += "; equal to " + opts.In + " (" + rep.Verify.Summary + ")"
		} else if opts.NoVerify {
			rep.Summary += "; not verified (--no-verify)"
		}
		switch {
		case opts.DryRun:
			rep.Summary += "; nothing written (--dry-run)"
		case rep.Written:
			rep.Summary += "; wrote " + opts.Out
		}
	}
	return printRewrite(opts, rep)
}

// loadModelInto loads the model in, which a command rewrites into out
// ("" with --dry-run): out is checked before (it can be written and is not
// in) and after loading (it is none of in's side files, nor is out.data;
// the side files either save writes replace no file out does not own,
// unless overwrite).
func loadModelInto(ios *IOStreams, in, out string, overwrite bool) (*graph.Model, error) {
	if out != "" {
		if err := checkOutputFile("-o", out, in); err != nil {
			return nil, err
		}
	}
	m, err := loadModel(ios.ErrOut, in)
	if err != nil {
		return nil, err
	}
	if err := checkModelOutput(out, in, m, overwrite); err != nil {
		return nil, err
	}
	return m, nil
}

// checkModelOutput refuses an output that saveRewritten or an unchanged
// save would write over a file model orig (loaded from in) is read from:
// out, or its side file out.data, being in or a side file of orig; and
// side files of either save that would replace a file out does not own.
func checkModelOutput(out, in string, orig *graph.Model, overwrite bool) error {
	if out == "" {
		return nil
	}
	reads := append([]string{in}, orig.SideFiles()...)
	if err := checkNotRead("-o", out, reads...); err != nil {
		return err
	}
	if len(orig.SideFiles()) > 0 {
		if err := checkNotRead("-o", out+".data", reads...); err != nil {
			return err
		}
	}
	if err := checkModelSave(orig, out, graph.SaveOptions{}, overwrite, reads...); err != nil {
		return err
	}
	return checkModelSave(orig, out, rewrittenSaveOptions(context.Background(), orig, out), overwrite, reads...)
}

// saveRewritten writes the rewritten model atomically. When the original
// keeps tensors in side files, the output does too (its own OUT.data),
// new tables included.
func saveRewritten(ctx context.Context, orig, m *graph.Model, out string) error {
	return m.Save(out, rewrittenSaveOptions(ctx, orig, out))
}

// rewrittenSaveOptions are saveRewritten's options: orig's tensors stored
// as orig stores them, external ones in OUT.data.
func rewrittenSaveOptions(ctx context.Context, orig *graph.Model, out string) graph.SaveOptions {
	smallest := int64(-1)
	for _, v := range orig.Graph.Initializers {
		if t := v.Const; t != nil && t.IsExternal() {
			if b := t.ByteSize(); smallest < 0 || b < smallest {
				smallest = b
			}
		}
	}
	if smallest < 0 {
		return graph.SaveOptions{Context: ctx}
	}
	return graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: max(smallest, 1), Location: filepath.Base(out) + ".data", Context: ctx}
}

func printRewrite(opts *rewriteOptions, rep *rewriteReport) error {
	if opts.JSON {
		return writeJSON(opts.IO, rep)
	}
	w := opts.IO.Out
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	any := false
	for _, ch := range rep.Changes {
		if len(ch.Added)+len(ch.Removed)+len(ch.Skipped) == 0 {
			continue
		}
		if !any {
			fmt.Fprintln(tw, "PASS\tSCHEME\tLAYERS\tNODES REMOVED\tNODES ADDED\tCONSTANTS ADDED")
			any = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", strings.TrimPrefix(ch.Pass, "rewrite_"), ch.Scheme, layerRange(ch.Layers),
			len(ch.Removed), len(ch.Added), humanBytes(max(ch.ConstBytes, 0)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ch := range rep.Changes {
		for _, n := range ch.Notes {
			fmt.Fprintf(w, "note (%s): %s\n", strings.TrimPrefix(ch.Pass, "rewrite_"), n)
		}
		for _, s := range ch.Skipped {
			fmt.Fprintf(w, "not rewritten (%s): %s\n", strings.TrimPrefix(ch.Pass, "rewrite_"), s)
		}
	}
	if rep.Verify != nil && !rep.Verify.Equal {
		if err := rep.Verify.WriteTable(w); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

// layerRange prints layer indexes compactly: 0-3,5 ("-" for none).
func layerRange(ls []int) string { return cmp.Or(passes.LayerRanges(ls, "-", ","), "-") }

// rewritePassNames are the --passes names, in the order the passes run.
func rewritePassNames() []string {
	var out []string
	for _, r := range schemes.Rewrites() {
		out = append(out, r.Name)
	}
	return out
}

// rewritePassesHelp is the --passes part of rewrite's help: each pass's
// name and what it does, from the list of schemes.
func rewritePassesHelp() string {
	var b strings.Builder
	for _, r := range schemes.Rewrites() {
		lines := strings.Split(r.Help, "\n")
		if len(r.Name) < 12 {
			fmt.Fprintf(&b, "  %-12s%s\n", r.Name, lines[0])
		} else {
			fmt.Fprintf(&b, "  %s  %s\n", r.Name, lines[0])
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "              %s\n", l)
		}
	}
	return b.String()
}
