package work

import (
	"fmt"
	"io"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// Dump prints the working copy, one node a line with the inferred shapes
// of its inputs and outputs (for debugging detectors).
func (w *Work) Dump(out io.Writer) {
	w.dumpGraph(out, w.M.Graph, "")
}

func (w *Work) valueString(v *graph.Value) string {
	if v == nil {
		return "_"
	}
	s := w.ShapeString(w.Shape(v))
	if t := w.consts[v]; t != nil && t.Len() <= 8 {
		return fmt.Sprintf("C%s%v", s, t.Float64s())
	}
	if w.IsConst(v) {
		return "W" + s
	}
	flag := ""
	if w.IsAct(v) {
		flag = "*"
	}
	return v.Name + flag + s
}

func (w *Work) dumpGraph(out io.Writer, g *graph.Graph, ind string) {
	for _, n := range g.Nodes() {
		var ins, outs []string
		for _, v := range n.Inputs() {
			ins = append(ins, w.valueString(v))
		}
		for _, v := range n.Outputs() {
			outs = append(outs, w.valueString(v))
		}
		var at []string
		for _, a := range n.Attrs {
			switch a.Type() {
			case graph.AttrInt, graph.AttrInts, graph.AttrFloat, graph.AttrString:
				at = append(at, fmt.Sprintf("%s=%v", a.Name(), a.Value()))
			}
		}
		fmt.Fprintf(out, "%s%d %s %s(%s) -> %s %s\n", ind, w.Pos(n), w.OrigName(n), n.OpType, strings.Join(ins, ", "), strings.Join(outs, ", "), strings.Join(at, " "))
		for _, sg := range n.Subgraphs() {
			w.dumpGraph(out, sg, ind+"    ")
		}
	}
}
