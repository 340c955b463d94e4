package emit

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/probe"
	"strings"
)

// program is a passes.FreqProgram transcribed into Go and C statements:
// the model's own arithmetic of frequencies that depend on the positions.
// The statements compute f[k], the frequency of pair k, from maxPos (the
// largest position) and n (the number of positions), rounding every step
// to the element type the graph computes it in.
type Program struct {
	K     int
	Go, C []string
	Steps []string // one line per step, for the documentation
}

func NewProgram(pg *probe.FreqProgram, pkg string) (*Program, error) {
	pr := &Program{K: len(pg.Index)}
	arg := func(a probe.FreqArg, vec []bool, lang string, name string) string {
		if a.Step >= 0 {
			if vec[a.Step] {
				return fmt.Sprintf("v%d[i]", a.Step)
			}
			return fmt.Sprintf("s%d", a.Step)
		}
		if len(a.Const) == 1 {
			if lang == "c" {
				return cNum(a.Const[0], "float64")
			}
			return FmtFloat(a.Const[0], 64)
		}
		return name + "[i]"
	}
	vec := make([]bool, len(pg.Steps))
	for k, st := range pg.Steps {
		vec[k] = st.Vector
		for lang, out := range map[string]*[]string{"go": &pr.Go, "c": &pr.C} {
			var args []string
			for j, a := range st.Args {
				name := fmt.Sprintf("c%d_%d", k, j)
				if a.Step < 0 && len(a.Const) > 1 {
					if len(a.Const) != pg.Len {
						return nil, fmt.Errorf("step %d: a constant of %d elements, vectors of %d", k, len(a.Const), pg.Len)
					}
					list := numList(a.Const, 8, func(v float64) string {
						if lang == "c" {
							return cNum(v, "float64")
						}
						return FmtFloat(v, 64)
					})
					if lang == "c" {
						*out = append(*out, fmt.Sprintf("static const double %s[%d] = {%s};", name, pg.Len, list))
					} else {
						*out = append(*out, fmt.Sprintf("%s := [%d]float64{%s}", name, pg.Len, list))
					}
				}
				args = append(args, arg(a, vec, lang, name))
			}
			e, err := opExpr(st.Op, args, lang, pkg)
			if err != nil {
				return nil, fmt.Errorf("step %d (%s): %w", k, st.Node, err)
			}
			e = rounded(st.Type, e, lang, pkg)
			switch {
			case st.Vector && lang == "go":
				*out = append(*out, fmt.Sprintf("var v%d [%d]float64", k, pg.Len), fmt.Sprintf("for i := range v%d {", k), fmt.Sprintf("v%d[i] = %s", k, e), "}")
			case st.Vector:
				*out = append(*out, fmt.Sprintf("double v%d[%d];", k, pg.Len), fmt.Sprintf("for (int i = 0; i < %d; i++) {", pg.Len), fmt.Sprintf("    v%d[i] = %s;", k, e), "}")
			case lang == "go":
				*out = append(*out, fmt.Sprintf("s%d := %s", k, e))
			default:
				*out = append(*out, fmt.Sprintf("double s%d = %s;", k, e))
			}
		}
		pr.Steps = append(pr.Steps, fmt.Sprintf("%s (%s, %s)", st.Op, st.Node, TypeName(st.Type)))
	}
	last := len(pg.Steps) - 1
	identity := vec[last] && len(pg.Index) == pg.Len
	for k, i := range pg.Index {
		identity = identity && i == k
	}
	if identity {
		pr.Go = append(pr.Go, "for k := range f {", fmt.Sprintf("f[k] = v%d[k]", last), "}")
		pr.C = append(pr.C, fmt.Sprintf("for (int k = 0; k < %d; k++) {", pg.Len), fmt.Sprintf("    f[k] = v%d[k];", last), "}")
		return pr, nil
	}
	for k, i := range pg.Index {
		src := fmt.Sprintf("s%d", last)
		if vec[last] {
			src = fmt.Sprintf("v%d[%d]", last, i)
		}
		pr.Go = append(pr.Go, fmt.Sprintf("f[%d] = %s", k, src))
		pr.C = append(pr.C, fmt.Sprintf("f[%d] = %s;", k, src))
	}
	return pr, nil
}

// opExpr is the expression of one step in lang.
func opExpr(op string, a []string, lang, pkg string) (string, error) {
	fn := func(goName, cName string) string {
		if lang == "c" {
			return cName
		}
		return "math." + goName
	}
	switch op {
	case "max_position":
		if lang == "c" {
			return "(double)max_pos", nil
		}
		return "float64(maxPos)", nil
	case "length":
		if lang == "c" {
			return "(double)n", nil
		}
		return "float64(n)", nil
	case "Add":
		return "(" + a[0] + " + " + a[1] + ")", nil
	case "Sub":
		return "(" + a[0] + " - " + a[1] + ")", nil
	case "Mul":
		return "(" + a[0] + " * " + a[1] + ")", nil
	case "Div":
		return "(" + a[0] + " / " + a[1] + ")", nil
	case "Pow":
		return fn("Pow", "pow") + "(" + a[0] + ", " + a[1] + ")", nil
	case "Max":
		return fn("Max", "fmax") + "(" + a[0] + ", " + a[1] + ")", nil
	case "Min":
		return fn("Min", "fmin") + "(" + a[0] + ", " + a[1] + ")", nil
	case "Clip":
		e := a[0]
		if len(a) > 1 && !isNaNLit(a[1]) && !isInfLit(a[1]) {
			e = fn("Max", "fmax") + "(" + e + ", " + a[1] + ")"
		}
		if len(a) > 2 && !isNaNLit(a[2]) && !isInfLit(a[2]) {
			e = fn("Min", "fmin") + "(" + e + ", " + a[2] + ")"
		}
		return e, nil
	case "Reciprocal":
		return "(1 / " + a[0] + ")", nil
	case "Neg":
		return "(-" + a[0] + ")", nil
	case "Sqrt", "Exp", "Log", "Floor", "Ceil":
		return fn(op, strings.ToLower(op)) + "(" + a[0] + ")", nil
	case "Cast":
		return a[0], nil
	case "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal":
		cmp := map[string]string{"Greater": ">", "Less": "<", "GreaterOrEqual": ">=", "LessOrEqual": "<=", "Equal": "=="}[op]
		if lang == "c" {
			return "(" + a[0] + " " + cmp + " " + a[1] + " ? 1.0 : 0.0)", nil
		}
		return "b2f(" + a[0] + " " + cmp + " " + a[1] + ")", nil
	case "Not":
		if lang == "c" {
			return "(" + a[0] + " == 0 ? 1.0 : 0.0)", nil
		}
		return "b2f(" + a[0] + " == 0)", nil
	case "Where":
		if lang == "c" {
			return "(" + a[0] + " != 0 ? " + a[1] + " : " + a[2] + ")", nil
		}
		return "pick(" + a[0] + ", " + a[1] + ", " + a[2] + ")", nil
	}
	return "", fmt.Errorf("op %s", op)
}

func isNaNLit(s string) bool { return s == "math.NaN()" || s == "NAN" }
func isInfLit(s string) bool { return strings.Contains(s, "Inf") || strings.Contains(s, "INFINITY") }

// rounded wraps e in the rounding to element type dt.
func rounded(dt graph.DataType, e, lang, pkg string) string {
	name := ""
	switch {
	case dt == graph.Float:
		name = "round32"
	case dt == graph.Float16:
		name = "roundFloat16"
	case dt == graph.BFloat16:
		name = "roundBFloat16"
	case dt.IsInt():
		if lang == "c" {
			return "trunc(" + e + ")"
		}
		return "math.Trunc(" + e + ")"
	default:
		return e
	}
	if lang == "c" {
		return pkg + "_" + snake(name) + "(" + e + ")"
	}
	return name + "(" + e + ")"
}
