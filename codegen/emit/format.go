package emit

import (
	"encoding/binary"
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/x448/float16"
	"math"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"unicode"
)

// embedThreshold is the size (elements) from which a Go table is stored as
// a binary file read with go:embed instead of a literal: literals of many
// thousands of numbers make slow compiles and unreadable diffs. C headers
// keep every table as an array literal (header-only).
const embedThreshold = 4096

// table is a constant array of the emitted code: a model's stored table,
// frequencies, slopes, or golden vectors.
type Table struct {
	// Name is the Go name (CName the C name, package prefix included).
	Name, CName string
	// Type is the element type: float32, float64, uint16 (float16 or
	// bfloat16 bit patterns), int32 or int64.
	Type string
	Vals []float64
	// From says where the values come from (a comment).
	From string
	// Golden tables are test data: never embedded (they live in the test
	// file).
	Golden bool
}

func (t *Table) Embed() bool { return !t.Golden && len(t.Vals) > embedThreshold }

// file is the name of the embedded data file.
func (t *Table) File(pkg string) string { return pkg + "_" + snake(t.Name) + ".bin" }

// bytes is the table as little-endian binary data.
func (t *Table) Bytes() []byte {
	var out []byte
	for _, v := range t.Vals {
		switch t.Type {
		case "float32":
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		case "float64":
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		case "uint16":
			out = binary.LittleEndian.AppendUint16(out, uint16(v))
		case "int32":
			out = binary.LittleEndian.AppendUint32(out, uint32(int32(v)))
		case "int64":
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(v)))
		}
	}
	return out
}

// goNum is the Go literal of v as a value of type typ (the shortest
// decimal that reads back as the same value).
func goNum(v float64, typ string) string {
	switch typ {
	case "float32":
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "float32(" + FmtFloat(v, 32) + ")"
		}
		return FmtFloat(v, 32)
	case "float64":
		return FmtFloat(v, 64)
	}
	return strconv.FormatInt(int64(v), 10)
}

// cNum is the C literal of v as a value of type typ.
func cNum(v float64, typ string) string {
	switch typ {
	case "float32":
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return cFloat(FmtFloat(v, 32))
		}
		return cFloat(FmtFloat(v, 32)) + "f"
	case "float64":
		return cFloat(FmtFloat(v, 64))
	case "uint16":
		return fmt.Sprintf("0x%04x", uint16(v))
	case "int64":
		return strconv.FormatInt(int64(v), 10) + "LL"
	}
	return strconv.FormatInt(int64(v), 10)
}

func FmtFloat(v float64, bits int) string {
	switch {
	case math.IsInf(v, 1):
		return "math.Inf(1)"
	case math.IsInf(v, -1):
		return "math.Inf(-1)"
	case math.IsNaN(v):
		return "math.NaN()"
	}
	return strconv.FormatFloat(v, 'g', -1, bits)
}

// cFloat makes a Go float literal a C one (a decimal point where it has
// none; infinities and NaN from math.h).
func cFloat(s string) string {
	switch s {
	case "math.Inf(1)":
		return "INFINITY"
	case "math.Inf(-1)":
		return "-INFINITY"
	case "math.NaN()":
		return "NAN"
	}
	if !strings.ContainsAny(s, ".eE") {
		return s + ".0"
	}
	return s
}

// numList prints values as a comma-separated list, perLine a line.
func numList(vals []float64, perLine int, f func(float64) string) string {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			if i%perLine == 0 {
				b.WriteString(",\n\t")
			} else {
				b.WriteString(", ")
			}
		}
		b.WriteString(f(v))
	}
	return b.String()
}

// snake turns a Go name into snake case (ropeCosTable -> rope_cos_table,
// RoPECosSin -> rope_cos_sin).
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if i > 0 && (prevLower || nextLower && unicode.IsUpper(r[i-1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// cname is the C name of a Go name: the package prefix and the snake
// case (RoPECosSin -> pkg_rope_cos_sin).
func Cname(pkg, name string) string {
	name = strings.NewReplacer("MRoPE", "Mrope", "mRoPE", "mrope", "RoPE", "Rope", "roPE", "rope", "ALiBi", "Alibi", "BFloat16", "Bfloat16").Replace(name)
	return pkg + "_" + snake(name)
}

// typeName is the name of an element type in the emitted code's docs.
func TypeName(dt graph.DataType) string {
	switch dt {
	case graph.Float:
		return "float32"
	case graph.Double:
		return "float64"
	case graph.Float16:
		return "float16"
	case graph.BFloat16:
		return "bfloat16"
	}
	return dt.String()
}

// roundTo rounds x to element type dt as the emitted code does (directly
// from float64, to nearest even).
func RoundTo(dt graph.DataType, x float64) float64 {
	switch dt {
	case graph.Float:
		return float64(float32(x))
	case graph.Float16:
		return roundBits(x, 10, -14, 65504)
	case graph.BFloat16:
		return roundBits(x, 7, -126, math.Ldexp(255.0/128, 127))
	}
	return x
}

// roundBits rounds x to a binary format with mant explicit mantissa bits,
// smallest normal exponent emin and largest finite value maxv (to
// nearest, ties to even; overflow to infinity).
func roundBits(x float64, mant, emin int, maxv float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	_, e := math.Frexp(x) // |x| in [2^(e-1), 2^e)
	e--
	if e < emin {
		e = emin
	}
	ulp := math.Ldexp(1, e-mant)
	r := math.RoundToEven(x/ulp) * ulp
	if math.Abs(r) > maxv {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// halfBits is the bit pattern of x (already rounded to dt) as a float16
// or bfloat16.
func HalfBits(dt graph.DataType, x float64) uint16 {
	if dt == graph.BFloat16 {
		return uint16(math.Float32bits(float32(x)) >> 16)
	}
	return uint16(float16.Fromfloat32(float32(x)))
}

// funcs are the template helpers of the language.
func (g *Gen) Funcs() template.FuncMap {
	pkg := g.Opts.Package
	return template.FuncMap{
		"pkg":   func() string { return pkg },
		"PKG":   func() string { return strings.ToUpper(pkg) },
		"snake": snake,
		"upper": strings.ToUpper,
		"lower": LowerFirst,
		"lc":    strings.ToLower,
		"wrap":  wrap,
		"c":     func(name string) string { return Cname(pkg, name) },
		"C":     func(name string) string { return strings.ToUpper(Cname(pkg, name)) },
		"gonum": goNum,
		"cnum":  cNum,
		"f32":   func(v float64) string { return FmtFloat(v, 32) },
		"f64":   func(v float64) string { return FmtFloat(v, 64) },
		"cf32":  func(v float64) string { return cNum(v, "float32") },
		"cf64":  func(v float64) string { return cNum(v, "float64") },
		"golist": func(t *Table) string {
			return numList(t.Vals, perLine(t.Type), func(v float64) string { return goNum(v, t.Type) })
		},
		"clist": func(t *Table) string {
			return numList(t.Vals, perLine(t.Type), func(v float64) string { return cNum(v, t.Type) })
		},
		"ints": func(v []int) string {
			var s []string
			for _, x := range v {
				s = append(s, strconv.Itoa(x))
			}
			return strings.Join(s, ", ")
		},
		"ctype":   ctype,
		"comment": comment,
		"add":     func(a, b int) int { return a + b },
		"mul":     func(a, b int) int { return a * b },
		"len": func(v any) int {
			if t, ok := v.(*Table); ok {
				return len(t.Vals)
			}
			return reflect.ValueOf(v).Len()
		},
		"file": func(t *Table) string { return t.File(pkg) },
		"tab": func(t *Table) tabView {
			return tabView{T: t, Embedded: g.Lang == "go" && t.Embed(), File: t.File(pkg), CName: Cname(pkg, t.Name)}
		},
		"rnd": func(typ string) string {
			name := map[string]string{"float32": "round32", "float16": "roundFloat16", "bfloat16": "roundBFloat16"}[typ]
			if name != "" && g.Lang == "c" {
				return pkg + "_" + snake(name)
			}
			return name
		},
	}
}

// tabView is what the table template reads.
type tabView struct {
	T        *Table
	Embedded bool
	File     string
	CName    string
}

func perLine(typ string) int {
	if typ == "uint16" || typ == "int32" || typ == "int64" {
		return 12
	}
	return 6
}

// ctype is the C type of a table element type.
func ctype(typ string) string {
	switch typ {
	case "float32":
		return "float"
	case "float64":
		return "double"
	case "uint16":
		return "uint16_t"
	case "int32":
		return "int32_t"
	case "int64":
		return "int64_t"
	}
	return typ
}

// comment makes text safe inside a comment of either language (no
// comment terminators, one line).
func comment(s string) string {
	s = strings.ReplaceAll(s, "*/", "* /")
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.TrimSpace(s)
}

// wrap breaks lines of text at spaces so that none is longer than 72
// characters (words longer than that stay whole).
func wrap(lines []string) []string {
	var out []string
	for _, l := range lines {
		cur := ""
		for _, w := range strings.Fields(l) {
			if cur != "" && len(cur)+1+len(w) > 72 {
				out = append(out, cur)
				cur = w
				continue
			}
			if cur != "" {
				cur += " "
			}
			cur += w
		}
		out = append(out, cur)
	}
	return out
}

func LowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}

func JoinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, x := range s[:len(s)-1] {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out + " and " + s[len(s)-1]
}

// close32 is the generated tests' comparison: within 1e-6 relative to
// max(1, |want|).
func Close32(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want))
}

func LayerList(ls []int) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprint(l))
	}
	return strings.Join(s, ", ")
}
