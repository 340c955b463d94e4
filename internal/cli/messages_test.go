package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// editCorpus loads a corpus model, edits it and saves it into a temporary
// folder as name.
func editCorpus(t *testing.T, corpus, name string, edit func(m *graph.Model)) string {
	t.Helper()
	m, err := graph.Load(corpusModel(corpus))
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	p := filepath.Join(t.TempDir(), name)
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// Number flags given NaN or an infinity exit 2 before any work (they
// failed late, as "the audit check failed", exit 1).
func TestNonFiniteFlagsExit2(t *testing.T) {
	llama, o := corpusModel("rope_llama"), filepath.Join(t.TempDir(), "x.onnx")
	ext := []string{"extend", llama, "-o", o, "--to", "128", "--method", "yarn", "--original-max-positions", "32"}
	for _, c := range []struct{ flag, value string }{
		{"--factor", "Inf"}, {"--factor", "-Inf"}, {"--beta-fast", "NaN"}, {"--beta-slow", "inf"},
		{"--attention-factor", "NaN"}, {"--low-freq-factor", "Inf"}, {"--high-freq-factor", "NaN"}, {"--alpha", "NaN"},
	} {
		args := append(ext[:len(ext):len(ext)], c.flag, c.value)
		code, _, e := runCLI(t, args...)
		oneLineExit2(t, args, code, e, c.flag, "give a finite number")
		if _, err := os.Stat(o); err == nil {
			t.Fatalf("%v wrote %s", args, o)
		}
	}
	args := []string{"verify", "--precision", llama, "--bound", "NaN"}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "--bound")
}

// A 1 MB node name is shortened in the error line (it was printed whole,
// a 2 MB line): its start, its end and its length.
func TestLongNamesShortenedInMessages(t *testing.T) {
	long := "n" + strings.Repeat("x", 1<<20) + "end"
	p := editCorpus(t, "rope_llama", "long.onnx", func(m *graph.Model) {
		g := m.Graph
		// A Reshape to a shape that does not fit fails when it runs.
		shape, err := graph.NewTensor("bad_shape", graph.Int64, []int64{1}, []int64{7})
		if err != nil {
			t.Fatal(err)
		}
		r := g.NewNode("Reshape", "", []*graph.Value{g.Outputs[0], g.AddInitializer(shape)}, 1)
		r.Name = long
		g.Append(r)
		g.Outputs[0] = r.Output(0)
	})
	b := newBadInputs(t)
	args := []string{"run", p, "--inputs", b.data}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "nxxxx", "end", " bytes)…")
	if len(e) > 1024 {
		t.Errorf("the error line is %d bytes", len(e))
	}
}

// verify says when a model draws random values without a seed: its
// outputs differ from run to run, and "not equal" alone blames the pair.
func TestVerifyNamesUnseededRandomOps(t *testing.T) {
	p := editCorpus(t, "rope_llama", "random.onnx", func(m *graph.Model) {
		g := m.Graph
		n := g.NewNode("RandomNormalLike", "", []*graph.Value{g.Outputs[0]}, 1)
		n.Name = "noise"
		g.Append(n)
		g.Outputs[0] = g.Op("Add", []*graph.Value{g.Outputs[0], n.Output(0)}, 1)[0]
		g.Outputs[0].Name = "logits_noisy"
	})
	code, out, e := runCLI(t, "verify", p, p)
	if code != ExitCheckFailed || !strings.Contains(e, `random ops without a seed (RandomNormalLike "noise")`) || !strings.Contains(e, "model A") || !strings.Contains(e, "model B") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, e, out)
	}
}

// Outputs of a different shape or element type are "not equal": exit 1
// (the documented code), for two models and against reference outputs,
// each side named.
func TestOutputShapeOrTypeDiffersExits1(t *testing.T) {
	llama := corpusModel("rope_llama")
	unsq := editCorpus(t, "rope_llama", "unsqueezed.onnx", func(m *graph.Model) {
		g := m.Graph
		ax, _ := graph.NewTensor("ax", graph.Int64, []int64{1}, []int64{0})
		name := g.Outputs[0].Name
		g.Outputs[0].Name = name + "_inner"
		g.Outputs[0] = g.Op("Unsqueeze", []*graph.Value{g.Outputs[0], g.AddInitializer(ax)}, 1)[0]
		g.Outputs[0].Name = name
	})
	cast := editCorpus(t, "rope_llama", "double.onnx", func(m *graph.Model) {
		g := m.Graph
		name := g.Outputs[0].Name
		g.Outputs[0].Name = name + "_inner"
		g.Outputs[0] = g.Op("Cast", []*graph.Value{g.Outputs[0]}, 1, graph.IntAttr("to", int64(graph.Double)))[0]
		g.Outputs[0].Name = name
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", llama, unsq}, "in A, [1 "},
		{[]string{"verify", llama, cast}, "element type float32 in A, float64 in B"},
	} {
		code, _, e := runCLI(t, c.args...)
		if code != ExitCheckFailed || !strings.Contains(e, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", c.args, code, e, c.want)
		}
	}
	// Against reference outputs: the reference's shape is named as the
	// reference's, not as A's.
	b := newBadInputs(t)
	ref := filepath.Join(b.data, "output_0.pb")
	rt, err := kernels.ReadTensorFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := graph.Load(b.good)
	wrong := kernels.FromSlice(append([]int{1}, rt.Shape...), kernels.Data[float32](rt))
	if err := kernels.WriteTensorFile(ref, m.Graph.Outputs[0].Name, wrong); err != nil {
		t.Fatal(err)
	}
	code, _, e := runCLI(t, "verify", b.good, "--against", b.data)
	if code != ExitCheckFailed || !strings.Contains(e, "in the reference, ") || !strings.Contains(e, " in A") {
		t.Errorf("--against: exit %d, stderr %q", code, e)
	}
}

// inspect reads no weights: a model whose external data file is absent
// is inspected, with the warning audit gives (it was refused).
func TestInspectWithoutExternalData(t *testing.T) {
	p := externalModel(t, "rope_llama", t.TempDir())
	os.Remove(filepath.Join(filepath.Dir(p), "weights.bin"))
	code, out, e := runCLI(t, "inspect", p)
	if code != 0 || !strings.Contains(e, `warning: `+p+`: external data file "weights.bin" is missing`) || !strings.Contains(out, "Nodes:") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, e, out)
	}
	if code, _, e := runCLI(t, "audit", p); code != 0 || !strings.Contains(e, `external data file "weights.bin" is missing`) {
		t.Errorf("audit: exit %d %q", code, e)
	}
}

// rewrite of a model onnxpe cannot run (an ATen op) is a rewrite that
// cannot be verified, not bad input: exit 1, naming the op and
// --no-verify, nothing written; --no-verify writes it.
func TestRewriteThatCannotBeVerified(t *testing.T) {
	p := editCorpus(t, "rope_llama", "aten.onnx", func(m *graph.Model) {
		g := m.Graph
		x := g.Op("ATen", []*graph.Value{g.Outputs[0]}, 1, graph.StringAttr("operator", "my_op"))[0]
		x.Name = "aten_out"
		g.AddOutput(x)
	})
	out := filepath.Join(t.TempDir(), "o.onnx")
	code, _, e := runCLI(t, "rewrite", p, "-o", out)
	if code != ExitCheckFailed || !strings.Contains(e, "cannot be verified") || !strings.Contains(e, "ATen") || !strings.Contains(e, "--no-verify") || strings.Count(e, "onnxpe: ") != 1 {
		t.Errorf("exit %d, stderr %q", code, e)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("written")
	}
	if code, _, e := runCLI(t, "rewrite", p, "-o", out, "--no-verify"); code != 0 {
		t.Errorf("--no-verify: exit %d %s", code, e)
	}
}

// extend sees, while planning, an input whose sequence axis is fixed at
// the model's maximum (it passed every check up to runs_at_n).
func TestExtendSeesFixedSizeInputsWhilePlanning(t *testing.T) {
	p := editCorpus(t, "learned_gpt2", "fixed.onnx", func(m *graph.Model) {
		for _, v := range m.Graph.Inputs {
			if v.Name == "attention_mask" {
				v.Type = graph.TensorType(graph.Int64, []graph.Dim{{Known: true, Value: 1}, {Known: true, Value: 64}})
			}
		}
	})
	args := []string{"extend", p, "--dry-run", "--to", "256"}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, `input "attention_mask"`, "axis 1 is fixed at 64", "256 positions")
}

// A missing .npz array is named with the arrays the file holds (the list
// was empty).
func TestMissingNPZArrayListsTheArrays(t *testing.T) {
	b := newBadInputs(t)
	m, _ := graph.Load(b.good)
	feeds, err := kernels.ReadInputs(b.data, m)
	if err != nil {
		t.Fatal(err)
	}
	first := kernels.FeedInputs(m)[0].Name
	npz := filepath.Join(t.TempDir(), "one.npz")
	writeNPZ(t, npz, map[string]*kernels.Tensor{first: feeds[first]})
	args := []string{"run", b.good, "--inputs", npz}
	code, _, e := runCLI(t, args...)
	oneLineExit2(t, args, code, e, "its arrays are "+first, "no array named")
}

// An attribute of the wrong type is refused by every command that loads
// the model, naming the node, the attribute and both types (B8: convert
// and rewrite wrote it on; ONNX Runtime refuses it).
func TestWrongAttributeTypeRefused(t *testing.T) {
	m := graph.NewModel(9, "t", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Known: true, Value: 2}, {Known: true, Value: 3}}))
	n := g.NewNode("Transpose", "", []*graph.Value{x}, 1, graph.StringAttr("perm", "abc"))
	n.Name = "tr"
	g.Append(n)
	g.AddOutput(n.Output(0))
	p := filepath.Join(t.TempDir(), "perm.onnx")
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	o := t.TempDir()
	for _, args := range [][]string{
		{"inspect", p},
		{"convert", p, "-o", filepath.Join(o, "c.onnx")},
		{"rewrite", p, "-o", filepath.Join(o, "r.onnx")},
		{"audit", p},
	} {
		code, _, e := runCLI(t, args...)
		oneLineExit2(t, args, code, e, `node "tr" (Transpose)`, "attribute perm", "a string", "a list of ints")
	}
	if es, _ := os.ReadDir(o); len(es) != 0 {
		t.Errorf("wrote %v", es)
	}
}
