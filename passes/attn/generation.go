package attn

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// SubAudit is the audit of a graph held by a generation op (the encoder,
// decoder or first-step decoder of BeamSearch, GreedySearch, Sampling,
// WhisperBeamSearch): ONNX Runtime runs that graph as a model of its own,
// so it is audited as one.
type SubAudit struct {
	// Node is the generation op in the working copy; Attr the attribute
	// holding the graph.
	Node *graph.Node
	Attr string
	// Where names the graph in reports: the original op's name, a slash
	// and the attribute ("BeamSearch_0/decoder").
	Where string
	// Report is the graph's own audit, its layers numbered from 0.
	Report *passes.Report
	// Base is the number of its first block in the model's numbering (the
	// blocks pass sets it): the graph's blocks take their numbers at the
	// generation op's place in the topological order.
	Base int
}

// generationAttrs orders a generation op's graphs as ONNX Runtime runs
// them: the encoder once, the first-step decoder once, then the decoder.
var generationAttrs = []string{"encoder", "init_decoder", "decoder"}

// Generation audits the graphs of generation ops.
var Generation = &passes.Pass[[]*SubAudit]{
	Name: "generation",
	Doc: `Audit the graphs that generation ops run as models of their own.

ONNX Runtime's BeamSearch, GreedySearch, Sampling and WhisperBeamSearch
hold the encoder and decoder of a model as graph attributes and run them
in a loop, each as a model: the graph's inputs are the model's inputs
(token ids, positions, masks, the KV cache). Each such graph is made a
model of its own (same opsets, functions and folder) and audited with the
whole pipeline. Its findings keep the original names of its nodes and
say which graph they live in; its blocks are numbered at the generation
op's place in the topological order (encoder, first-step decoder,
decoder), consistently with the blocks of the main graph. The graphs are
audited by Options.AuditGraph (the audit's own driver); without it they
are left out.`,
	Requires: []passes.Analyzer{work.Normalize},
	Run:      runGeneration,
}

func runGeneration(c *passes.Context) ([]*SubAudit, error) {
	if c.Options.AuditGraph == nil {
		return []*SubAudit(nil), nil
	}
	w := work.Of(c)
	var out []*SubAudit
	var gens []*graph.Node
	for _, g := range DetectGraphs(w) {
		for n := range g.All() {
			if work.GenerationOps[work.OpKey(n)] {
				gens = append(gens, n)
			}
		}
	}
	slices.SortFunc(gens, func(a, b *graph.Node) int { return w.Pos(a) - w.Pos(b) })
	for _, n := range gens {
		orig := w.OrigNode(n)
		if orig == nil {
			continue
		}
		for _, attr := range sortedGraphAttrs(orig) {
			where := w.OrigName(n) + "/" + attr
			sm, err := w.Orig.GraphModel(orig.Attr(attr).Graph)
			if err != nil {
				c.Miss("generation", where, "the graph cannot be audited alone: "+err.Error(), 0)
				continue
			}
			r, sc, err := c.Options.AuditGraph(sm, where, c.Options)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			for _, m := range sc.Trace() {
				c.Miss(m.Rule, where+": "+m.At, m.Reason, m.Score)
			}
			out = append(out, &SubAudit{Node: n, Attr: attr, Where: where, Report: r})
		}
	}
	return out, nil
}

// sortedGraphAttrs lists the graph attributes of n: the generation order
// first, then any other in the node's order.
func sortedGraphAttrs(n *graph.Node) []string {
	var out []string
	for _, a := range generationAttrs {
		if at := n.Attr(a); at != nil && at.Graph != nil {
			out = append(out, a)
		}
	}
	for _, at := range n.Attrs {
		if at.Graph != nil && !slices.Contains(out, at.Name()) {
			out = append(out, at.Name())
		}
	}
	return out
}
