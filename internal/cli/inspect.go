package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/onnxpe/onnxpe/graph"
)

type inspectOptions struct {
	IO    *IOStreams
	Model string
	JSON  bool
}

// NewCmdInspect builds `onnxpe inspect`.
func NewCmdInspect(ios *IOStreams) *cobra.Command {
	opts := &inspectOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "inspect MODEL",
		Short: "Summarise a model: IR and opsets, inputs and outputs, nodes, weights",
		Long: `Inspect prints what a model file holds: its IR version and producer, the
operator sets it imports, its inputs and outputs with element types and
symbolic shapes, how many nodes of each op type it has, its initializers
(count and bytes, inline and external), model-local functions and subgraphs.

External weights are not read: inspecting a model with gigabytes of
external data is fast and uses little memory.

` + exitCodesHelp,
		Example: `  onnxpe inspect model.onnx
  onnxpe inspect model.onnx --json | jq .nodes_by_op`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Model = args[0]
			return inspectRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// InspectReport is the JSON form of `onnxpe inspect`.
type InspectReport struct {
	File            string        `json:"file"`
	IRVersion       int64         `json:"ir_version"`
	ProducerName    string        `json:"producer_name"`
	ProducerVersion string        `json:"producer_version"`
	Domain          string        `json:"domain,omitempty"`
	ModelVersion    int64         `json:"model_version,omitempty"`
	Opsets          []graph.Opset `json:"opsets"`
	Inputs          []ValueReport `json:"inputs"`
	Outputs         []ValueReport `json:"outputs"`
	Nodes           int           `json:"nodes"`
	NodesByOp       []OpCount     `json:"nodes_by_op"`
	Initializers    InitReport    `json:"initializers"`
	Functions       []FuncReport  `json:"functions"`
	Subgraphs       []SubReport   `json:"subgraphs"`
	Metadata        [][2]string   `json:"metadata,omitempty"`
	TrainingInfo    bool          `json:"training_info,omitempty"`
	// Repairs are the rules of the format the file breaks that the loader
	// tolerated (also printed as warnings on standard error).
	Repairs []string `json:"repairs,omitempty"`
}

// ValueReport describes a graph input or output.
type ValueReport struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Type  string `json:"elem_type,omitempty"`
	Shape []any  `json:"shape"`
}

// OpCount counts the nodes of one op type (in the main graph, subgraphs
// and functions).
type OpCount struct {
	Domain string `json:"domain"`
	OpType string `json:"op_type"`
	Count  int    `json:"count"`
}

// InitReport counts initializers.
type InitReport struct {
	Count         int      `json:"count"`
	Bytes         int64    `json:"bytes"`
	InlineCount   int      `json:"inline_count"`
	InlineBytes   int64    `json:"inline_bytes"`
	ExternalCount int      `json:"external_count"`
	ExternalBytes int64    `json:"external_bytes"`
	ExternalFiles []string `json:"external_files,omitempty"`
}

// FuncReport describes a model-local function.
type FuncReport struct {
	Domain string `json:"domain"`
	Name   string `json:"name"`
	Nodes  int    `json:"nodes"`
}

// SubReport describes a subgraph held by a node attribute.
type SubReport struct {
	Node      string `json:"node"`
	OpType    string `json:"op_type"`
	Attribute string `json:"attribute"`
	Nodes     int    `json:"nodes"`
}

func valueReport(v *graph.Value) ValueReport {
	r := ValueReport{Name: v.Name, Kind: v.Type.Kind(), Shape: []any{}}
	if et := v.Type.ElemType(); et != graph.Undefined {
		r.Type = et.String()
	}
	if dims, ok := v.Type.Shape(); ok {
		for _, d := range dims {
			switch {
			case d.Known:
				r.Shape = append(r.Shape, d.Value)
			case d.Param != "":
				r.Shape = append(r.Shape, d.Param)
			default:
				r.Shape = append(r.Shape, nil)
			}
		}
	} else {
		r.Shape = nil
	}
	return r
}

// Inspect summarises a loaded model.
func Inspect(path string, m *graph.Model) *InspectReport {
	r := &InspectReport{
		File: path, IRVersion: m.IRVersion(), ProducerName: m.ProducerName(), ProducerVersion: m.ProducerVersion(),
		Domain: m.Domain(), ModelVersion: m.ModelVersion(), Opsets: m.Opsets(), Metadata: m.Metadata(),
		TrainingInfo: m.HasTrainingInfo(), Inputs: []ValueReport{}, Outputs: []ValueReport{},
		Functions: []FuncReport{}, Subgraphs: []SubReport{},
	}
	for _, rp := range m.Repairs() {
		r.Repairs = append(r.Repairs, rp.Msg)
	}
	inits := map[*graph.Value]bool{}
	for _, v := range m.Graph.Initializers {
		inits[v] = true
	}
	for _, v := range m.Graph.Inputs {
		if !inits[v] {
			r.Inputs = append(r.Inputs, valueReport(v))
		}
	}
	for _, v := range m.Graph.Outputs {
		r.Outputs = append(r.Outputs, valueReport(v))
	}
	counts := map[[2]string]int{}
	m.Walk(func(n *graph.Node) {
		r.Nodes++
		counts[[2]string{n.Domain, n.OpType}]++
		for _, a := range n.Attrs {
			gs := a.Graphs
			if a.Graph != nil {
				gs = append([]*graph.Graph{a.Graph}, gs...)
			}
			for _, g := range gs {
				cnt := 0
				g.Walk(func(*graph.Node) { cnt++ })
				r.Subgraphs = append(r.Subgraphs, SubReport{Node: n.Name, OpType: n.OpType, Attribute: a.Name(), Nodes: cnt})
			}
		}
	})
	for k, c := range counts {
		r.NodesByOp = append(r.NodesByOp, OpCount{Domain: k[0], OpType: k[1], Count: c})
	}
	sort.Slice(r.NodesByOp, func(i, j int) bool {
		a, b := r.NodesByOp[i], r.NodesByOp[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		return a.OpType < b.OpType
	})
	files := map[string]bool{}
	for _, v := range m.Graph.Initializers {
		t := v.Const
		size := t.ByteSize()
		if size < 0 {
			size = 0
		}
		r.Initializers.Count++
		r.Initializers.Bytes += size
		if e := t.External(); e != nil {
			r.Initializers.ExternalCount++
			r.Initializers.ExternalBytes += size
			if !files[e.Location] {
				files[e.Location] = true
				r.Initializers.ExternalFiles = append(r.Initializers.ExternalFiles, e.Location)
			}
		} else {
			r.Initializers.InlineCount++
			r.Initializers.InlineBytes += size
		}
	}
	for _, f := range m.Functions {
		cnt := 0
		f.Body.Walk(func(*graph.Node) { cnt++ })
		r.Functions = append(r.Functions, FuncReport{Domain: f.Domain, Name: f.Name, Nodes: cnt})
	}
	return r
}

func inspectRun(opts *inspectOptions) error {
	// inspect never reads external weights: their files may be absent.
	m, err := loadModelWith(opts.IO.ErrOut, opts.Model, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		return err
	}
	warnMissingExternal(opts.IO.ErrOut, opts.Model, m, "inspect reads no weights; their sizes are as the model declares them")
	r := Inspect(opts.Model, m)
	if opts.JSON {
		return writeJSON(opts.IO, r)
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "%s\n", r.File)
	fmt.Fprintf(w, "  IR version %d, produced by %s %s\n", r.IRVersion, orDash(r.ProducerName), r.ProducerVersion)
	var ops []string
	for _, o := range r.Opsets {
		d := o.Domain
		if d == "" {
			d = "ai.onnx"
		}
		ops = append(ops, fmt.Sprintf("%s %d", d, o.Version))
	}
	fmt.Fprintf(w, "  opsets: %s\n", strings.Join(ops, ", "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nINPUT\tTYPE\tSHAPE")
	for _, v := range r.Inputs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, orDash(v.Type), shapeString(v.Shape))
	}
	fmt.Fprintln(tw, "\nOUTPUT\tTYPE\tSHAPE")
	for _, v := range r.Outputs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, orDash(v.Type), shapeString(v.Shape))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nNodes: %d\n", r.Nodes)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.NodesByOp {
		op := c.OpType
		if c.Domain != "" {
			op = c.Domain + "." + op
		}
		fmt.Fprintf(tw, "  %s\t%d\n", op, c.Count)
	}
	tw.Flush()
	in := r.Initializers
	fmt.Fprintf(w, "\nInitializers: %d (%s): %d inline (%s), %d external (%s)\n", in.Count, humanBytes(in.Bytes),
		in.InlineCount, humanBytes(in.InlineBytes), in.ExternalCount, humanBytes(in.ExternalBytes))
	if len(in.ExternalFiles) > 0 {
		fmt.Fprintf(w, "  external files: %s\n", strings.Join(in.ExternalFiles, ", "))
	}
	if len(r.Functions) > 0 {
		fmt.Fprintf(w, "\nFunctions: %d\n", len(r.Functions))
		for _, f := range r.Functions {
			fmt.Fprintf(w, "  %s.%s (%d nodes)\n", f.Domain, f.Name, f.Nodes)
		}
	}
	if len(r.Subgraphs) > 0 {
		fmt.Fprintf(w, "\nSubgraphs: %d\n", len(r.Subgraphs))
		for _, s := range r.Subgraphs {
			fmt.Fprintf(w, "  %s %s.%s (%d nodes)\n", s.OpType, orDash(s.Node), s.Attribute, s.Nodes)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shapeString(shape []any) string {
	if shape == nil {
		return "[...]"
	}
	parts := make([]string, len(shape))
	for i, d := range shape {
		if d == nil {
			parts[i] = "?"
		} else {
			parts[i] = fmt.Sprint(d)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
