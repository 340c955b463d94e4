package codegen_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestTransposedLearnedTableMatchesTheModel generates Go and C for the
// learned tables stored transposed ([dim, positions], read by Gather on
// axis 1; from 0, and from RoBERTa's offset 2 with its positions counted
// from the ids): both packages pass their own tests, and the encoding
// they give at every position the table holds is, bit for bit, what
// onnxpe's executor computes in the model for a sequence of that length
// (the value added to the embeddings, read with kernels.Options.Outputs).
// Laying the table out by its stored rows ([dim][positions] read as
// [positions][dim]) fails the comparison.
func TestTransposedLearnedTableMatchesTheModel(t *testing.T) {
	goBin := goTool()
	cc, ccErr := exec.LookPath("gcc")
	root := t.TempDir()
	writeFiles(t, filepath.Join(root, "go"), []codegen.File{{Name: "go.mod", Data: []byte("module example.com/transposed\n\ngo 1.21\n")}})
	cases := []struct {
		name      string
		rows      int64
		offset    bool
		positions int // the positions the table holds
		first     int // the table's column of position 0
	}{
		{"learnedtransposed", 72, false, 72, 0},
		{"learnedtransposedoffset", 66, true, 64, 2},
	}
	var pkgs []string
	for _, c := range cases {
		m, peName := testmodels.LearnedTransposed(c.rows, c.offset)
		rep, ctx, err := audit.AuditModel(m, c.name, passes.Options{})
		if err != nil {
			t.Fatalf("%s: audit: %v", c.name, err)
		}
		var ev *absolute.TableEvidence
		for _, f := range rep.Findings {
			if f.Scheme == learned.Name {
				ev, _ = f.Evidence.(*absolute.TableEvidence)
			}
		}
		if ev == nil || ev.Axis != 1 {
			t.Fatalf("%s: the audit found no learned table read on axis 1: %+v", c.name, rep.Findings)
		}
		// The encoding at positions 0..n-1 as the model computes it.
		n := c.positions
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = 2 + int64(i%40) // never the padding id 1
		}
		s, err := kernels.NewSession(m, kernels.Options{Outputs: []string{peName}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(map[string]*kernels.Tensor{"input_ids": kernels.FromSlice([]int{1, n}, ids)})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := out[peName].Float64s()
		if len(want) != n*32 {
			t.Fatalf("%s: the encoding has %d values, want %d", c.name, len(want), n*32)
		}
		// The stored table holds position p in column p+first: the
		// model's values are not those of its rows read in order.
		tab := probe.Const(ctx, ev.Table)
		if tab == nil {
			t.Fatalf("%s: no table %q", c.name, ev.Table)
		}
		if tv := tab.Float64s(); slices32Equal(tv[:32], want[:32]) {
			t.Fatalf("%s: position 0 is the table's first stored row: the test tells nothing", c.name)
		}
		bits := make([]string, len(want))
		for i, v := range want {
			bits[i] = fmt.Sprintf("0x%08x", math.Float32bits(float32(v)))
		}
		list := strings.Join(bits, ", ")

		for _, lang := range emit.Languages {
			res, err := codegen.Generate(rep, ctx, emit.Options{Lang: lang, Package: c.name, Model: c.name + ".onnx", SHA256: strings.Repeat("0", 64)})
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, lang, err)
			}
			for _, sk := range res.Skipped {
				t.Errorf("%s %s: %s left out: %s", c.name, lang, sk.Scheme, sk.Reason)
			}
			switch lang {
			case "go":
				res.Files = append(res.Files, codegen.File{Name: "model_test.go", Data: []byte(fmt.Sprintf(`package %[1]s

import (
	"math"
	"testing"
)

var modelBits = [...]uint32{%[2]s}

// TestTheModelsPositions compares the encoding at every position the
// table holds with the values onnxpe's executor computed in the model.
func TestTheModelsPositions(t *testing.T) {
	const n = %[3]d
	if PositionEmbeddingMaxPositions != n || PositionEmbeddingOffset != %[4]d {
		t.Fatalf("MaxPositions %%d, Offset %%d; want %[3]d, %[4]d", PositionEmbeddingMaxPositions, PositionEmbeddingOffset)
	}
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = int64(i)
	}
	dst := make([]float32, n*PositionEmbeddingDim)
	PositionEmbedding(dst, pos)
	for i, v := range dst {
		if math.Float32bits(v) != modelBits[i] {
			t.Fatalf("position %%d, column %%d: %%v, the model %%v", i/PositionEmbeddingDim, i%%PositionEmbeddingDim, v, math.Float32frombits(modelBits[i]))
		}
	}
}
`, c.name, list, n, c.first))})
				writeFiles(t, filepath.Join(root, "go", c.name), res.Files)
				pkgs = append(pkgs, "./"+c.name)
			case "c":
				dir := filepath.Join(root, "c", c.name)
				writeFiles(t, dir, res.Files)
				if ccErr != nil {
					continue
				}
				if out, err := run(dir, cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", c.name+"_test", c.name+"_test.c", "-lm"); err != nil {
					t.Fatalf("%s: gcc: %v\n%s", c.name, err, out)
				}
				if out, err := run(dir, "./"+c.name+"_test"); err != nil || !strings.Contains(out, "ok") {
					t.Fatalf("%s: the C test program: %v\n%s", c.name, err, out)
				}
				fn := cName(t, res.Files, c.name)
				prog := fmt.Sprintf(`#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "%[1]s.h"

static const uint32_t model_bits[] = {%[2]s};

int main(void) {
    enum { N = %[3]d, D = 32 };
    static float got[N * D];
    int64_t pos[N];
    for (int i = 0; i < N; i++) pos[i] = i;
    if (%[4]s(got, pos, N) != 0) {
        printf("refused the positions\n");
        return 1;
    }
    for (int i = 0; i < N * D; i++) {
        uint32_t b;
        memcpy(&b, &got[i], sizeof b);
        if (b != model_bits[i]) {
            printf("position %%d, column %%d: %%g, the model %%08x\n", i / D, i %% D, (double)got[i], (unsigned)model_bits[i]);
            return 1;
        }
    }
    printf("ok\n");
    return 0;
}
`, c.name, list, n, fn)
				writeFiles(t, dir, []codegen.File{{Name: "model_check.c", Data: []byte(prog)}})
				if out, err := run(dir, cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", "model_check", "model_check.c", "-lm"); err != nil {
					t.Fatalf("%s: gcc: %v\n%s", c.name, err, out)
				}
				if out, err := run(dir, "./model_check"); err != nil || !strings.Contains(out, "ok") {
					t.Errorf("%s: C against the model: %v\n%s", c.name, err, out)
				}
			}
		}
	}
	if out, err := run(filepath.Join(root, "go"), goBin, "vet", "./..."); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	if out, err := run(filepath.Join(root, "go"), goBin, append([]string{"test", "-count=1", "-vet=off"}, pkgs...)...); err != nil {
		t.Errorf("go test: %v\n%s", err, out)
	}
	if ccErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no C compiler: %v", ccErr)
		}
		t.Skipf("SKIP the C half: no gcc (%v)", ccErr)
	}
}

// slices32Equal reports whether a and b hold the same float32 values.
func slices32Equal(a, b []float64) bool {
	for i := range a {
		if float32(a[i]) != float32(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// cName is the C function that writes the encoding, from the header.
func cName(t *testing.T, files []codegen.File, pkg string) string {
	t.Helper()
	fn := pkg + "_position_embedding"
	for _, f := range files {
		if f.Name == pkg+".h" && strings.Contains(string(f.Data), "static inline int "+fn+"(float *dst, const int64_t *positions, size_t n)") {
			return fn
		}
	}
	t.Fatalf("%s.h has no %s(float *dst, const int64_t *positions, size_t n)", pkg, fn)
	return ""
}
