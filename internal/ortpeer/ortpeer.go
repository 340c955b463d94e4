//go:build ort

package ortpeer

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/x448/float16"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// ErrNoInputs is returned for models without inputs, which the Go binding
// of ONNX Runtime cannot run.
var ErrNoInputs = errors.New("ortpeer: the ONNX Runtime binding cannot run a model without inputs")

// ErrNeedShape is returned by Run for a float16, bfloat16 or scalar output
// whose expected shape was not given (onnxruntime_go cannot allocate it).
var ErrNeedShape = errors.New("ortpeer: the output's expected shape must be given")

// Available reports whether this binary was built with ONNX Runtime
// support (build tag ort).
func Available() bool { return true }

var (
	initOnce sync.Once
	initErr  error
)

// Init loads the ONNX Runtime library (path "" means ONNXPE_ORT_LIB) and
// starts its environment, once per process. ONNX Runtime logs only fatal
// errors: the errors of a run come back as Go errors (its own copy on
// stderr would break the one-line error of the command line).
func Init(path string) error {
	initOnce.Do(func() {
		if path == "" {
			path = LibPath()
		}
		if path == "" {
			initErr = errors.New("ortpeer: no ONNX Runtime library: set " + EnvLib + " (make ort installs one)")
			return
		}
		ort.SetSharedLibraryPath(path)
		if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
			initErr = fmt.Errorf("ortpeer: loading %s: %w", path, err)
		}
	})
	return initErr
}

// Options configure a session.
type Options struct {
	// Threads is the intra-op thread count; 0 lets ONNX Runtime choose
	// (all cores).
	Threads int
	// Level is the graph optimisation level: "disable", "basic",
	// "extended" or "all" ("" means "disable", so that ONNX Runtime
	// computes the graph as written).
	Level string
	// OptimizedModelPath, if set, is where ONNX Runtime saves the model
	// after its optimisations.
	OptimizedModelPath string
	// ProfilePrefix, if set, turns on ONNX Runtime's profiler: the
	// session writes a JSON trace of every node's run, named from the
	// prefix, when it is closed.
	ProfilePrefix string
}

// Session is an ONNX Runtime session over one model file.
type Session struct {
	s       *ort.DynamicAdvancedSession
	inputs  []string
	outputs []string
	outType []graph.DataType
	// needShape: some output is float16, bfloat16 or a declared scalar.
	needShape bool
}

// NewSession opens a model in ONNX Runtime. The model's inputs (those not
// fed by initializers) and outputs are read from m, which must be the
// model stored at path.
func NewSession(path string, m *graph.Model, opts Options) (*Session, error) {
	if err := Init(""); err != nil {
		return nil, err
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, err
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return nil, err
		}
	}
	level := map[string]ort.GraphOptimizationLevel{
		"": ort.GraphOptimizationLevelDisableAll, "disable": ort.GraphOptimizationLevelDisableAll,
		"basic": ort.GraphOptimizationLevelEnableBasic, "extended": ort.GraphOptimizationLevelEnableExtended,
		"all": ort.GraphOptimizationLevelEnableAll,
	}
	lv, ok := level[opts.Level]
	if !ok {
		return nil, fmt.Errorf("ortpeer: unknown optimisation level %q", opts.Level)
	}
	if err := so.SetGraphOptimizationLevel(lv); err != nil {
		return nil, err
	}
	if opts.OptimizedModelPath != "" {
		if err := so.SetOptimizedModelFilePath(opts.OptimizedModelPath); err != nil {
			return nil, err
		}
	}
	if opts.ProfilePrefix != "" {
		if err := so.EnableProfiling(opts.ProfilePrefix); err != nil {
			return nil, err
		}
	}
	s := &Session{}
	inits := map[*graph.Value]bool{}
	for _, v := range m.Graph.Initializers {
		inits[v] = true
	}
	for _, v := range m.Graph.Inputs {
		if !inits[v] {
			s.inputs = append(s.inputs, v.Name)
		}
	}
	for _, v := range m.Graph.Outputs {
		s.outputs = append(s.outputs, v.Name)
		dt := v.Type.ElemType()
		s.outType = append(s.outType, dt)
		dims, ok := v.Type.Shape()
		s.needShape = s.needShape || customType(dt) || ok && len(dims) == 0
	}
	s.s, err = ort.NewDynamicAdvancedSession(path, s.inputs, s.outputs, so)
	if err != nil {
		return nil, fmt.Errorf("ortpeer: %s: %w", path, err)
	}
	return s, nil
}

// NeedsShapes reports whether Run needs the expected shape of an output
// (one of type float16 or bfloat16, or declared as a scalar): an error of
// Run on such a model may then be a shape different from the one given
// rather than a refusal of ONNX Runtime.
func (s *Session) NeedsShapes() bool { return s.needShape }

// Close releases the session.
func (s *Session) Close() error { return s.s.Destroy() }

// Run runs the model. like gives, by output name, a tensor of the expected
// element type and shape (onnxpe's own result) for the float16, bfloat16
// and scalar outputs, which onnxruntime_go v1.36.0 cannot allocate itself
// (it copies one byte per element of custom types and refuses shapes
// without dimensions): those are allocated here and ONNX Runtime writes
// into them, and ONNX Runtime reports an error when its result has
// another shape (see NeedsShapes). Other outputs are allocated by ONNX Runtime
// (like is ignored for them), so that their shapes are ONNX Runtime's own.
func (s *Session) Run(inputs map[string]*kernels.Tensor, like map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
	if len(s.inputs) == 0 {
		// onnxruntime_go v1.36.0 indexes the first input unconditionally.
		return nil, ErrNoInputs
	}
	in := make([]ort.Value, len(s.inputs))
	defer func() {
		for _, v := range in {
			destroy(v)
		}
	}()
	for i, name := range s.inputs {
		t, ok := inputs[name]
		if !ok {
			return nil, fmt.Errorf("ortpeer: no value for input %q", name)
		}
		v, err := toORT(t)
		if err != nil {
			return nil, fmt.Errorf("ortpeer: input %q: %w", name, err)
		}
		in[i] = v
	}
	out := make([]ort.Value, len(s.outputs))
	defer func() {
		for _, v := range out {
			destroy(v)
		}
	}()
	for i, name := range s.outputs {
		dt := s.outType[i]
		l, ok := like[name]
		if ok && dt == graph.Undefined {
			dt = l.DType
		}
		if !customType(dt) && (!ok || len(l.Shape) > 0) {
			continue
		}
		if !ok {
			return nil, fmt.Errorf("output %q is %v: %w", name, dt, ErrNeedShape)
		}
		v, err := toORT(kernels.New(l.DType, l.Shape...))
		if err != nil {
			return nil, fmt.Errorf("ortpeer: output %q: %w", name, err)
		}
		out[i] = v
	}
	if err := s.s.Run(in, out); err != nil {
		return nil, fmt.Errorf("ortpeer: run: %w", err)
	}
	res := make(map[string]*kernels.Tensor, len(out))
	for i, v := range out {
		t, err := fromORT(v)
		if err != nil {
			return nil, fmt.Errorf("ortpeer: output %q: %w", s.outputs[i], err)
		}
		res[s.outputs[i]] = t
	}
	return res, nil
}

// destroy releases a value, which may be nil or a typed nil.
func destroy(v ort.Value) {
	if v == nil {
		return
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return
	}
	v.Destroy()
}

func ortShape(s []int) ort.Shape {
	sh := make(ort.Shape, len(s))
	for i, d := range s {
		sh[i] = int64(d)
	}
	return sh
}

// eightBit maps the 8-bit float types, which onnxpe holds as their bit
// patterns in []uint8, to ONNX Runtime's element types.
var eightBit = map[graph.DataType]ort.TensorElementDataType{
	graph.Float8E4M3FN: ort.TensorElementDataTypeFloat8E4M3FN, graph.Float8E4M3FNUZ: ort.TensorElementDataTypeFloat8E4M3FNUZ,
	graph.Float8E5M2: ort.TensorElementDataTypeFloat8E5M2, graph.Float8E5M2FNUZ: ort.TensorElementDataTypeFloat8E5M2FNUZ,
	graph.Float8E8M0: ort.TensorElementDataTypeFloat8E8M0,
}

// customType reports whether values of dt go through onnxruntime_go's
// CustomDataTensor (which cannot allocate outputs itself).
func customType(dt graph.DataType) bool {
	_, ok := eightBit[dt]
	return ok || dt == graph.Float16 || dt == graph.BFloat16
}

func toORT(t *kernels.Tensor) (ort.Value, error) {
	sh := ortShape(t.Shape)
	if len(sh) == 0 {
		return scalarToORT(t)
	}
	if et, ok := eightBit[t.DType]; ok {
		d := t.Raw().([]uint8)
		if len(d) == 0 {
			d = make([]uint8, 1) // onnxruntime_go refuses an empty buffer
		}
		return ort.NewCustomDataTensor(sh, d, et)
	}
	switch d := t.Raw().(type) {
	case []int16:
		return ort.NewTensor(sh, d)
	case []uint16:
		return ort.NewTensor(sh, d)
	case []uint32:
		return ort.NewTensor(sh, d)
	case []uint64:
		return ort.NewTensor(sh, d)
	case []string:
		st, err := ort.NewStringTensor(sh)
		if err != nil {
			return nil, err
		}
		if err := st.SetContents(d); err != nil {
			st.Destroy()
			return nil, err
		}
		return st, nil
	case []float32:
		return ort.NewTensor(sh, d)
	case []float64:
		return ort.NewTensor(sh, d)
	case []int64:
		return ort.NewTensor(sh, d)
	case []int32:
		return ort.NewTensor(sh, d)
	case []int8:
		return ort.NewTensor(sh, d)
	case []uint8:
		return ort.NewTensor(sh, d)
	case []bool:
		return ort.NewTensor(sh, d)
	case []float16.Float16:
		return ort.NewCustomDataTensor(sh, bytesOf(d), ort.TensorElementDataTypeFloat16)
	case []graph.BF16:
		return ort.NewCustomDataTensor(sh, bytesOf(d), ort.TensorElementDataTypeBFloat16)
	}
	return nil, fmt.Errorf("element type %v is not supported", t.DType)
}

func scalarToORT(t *kernels.Tensor) (ort.Value, error) {
	if _, ok := eightBit[t.DType]; ok {
		return nil, fmt.Errorf("scalars of %v are not supported by the ONNX Runtime binding", t.DType)
	}
	switch d := t.Raw().(type) {
	case []int16:
		return ort.NewScalar(d[0])
	case []uint16:
		return ort.NewScalar(d[0])
	case []uint32:
		return ort.NewScalar(d[0])
	case []uint64:
		return ort.NewScalar(d[0])
	case []float32:
		return ort.NewScalar(d[0])
	case []float64:
		return ort.NewScalar(d[0])
	case []int64:
		return ort.NewScalar(d[0])
	case []int32:
		return ort.NewScalar(d[0])
	case []int8:
		return ort.NewScalar(d[0])
	case []uint8:
		return ort.NewScalar(d[0])
	case []bool:
		return ort.NewScalar(d[0])
	}
	return nil, fmt.Errorf("scalars of %v are not supported by the ONNX Runtime binding", t.DType)
}

func bytesOf[T ~uint16](d []T) []byte {
	if len(d) == 0 {
		// onnxruntime_go refuses an empty buffer even for a tensor
		// without elements; ONNX Runtime reads none of these bytes.
		return make([]byte, 2)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 2*len(d))
}

func shapeOf(s ort.Shape) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func fromORT(v ort.Value) (*kernels.Tensor, error) {
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]float32(nil), t.GetData()...)), nil
	case *ort.Tensor[float64]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]float64(nil), t.GetData()...)), nil
	case *ort.Tensor[int64]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]int64(nil), t.GetData()...)), nil
	case *ort.Tensor[int32]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]int32(nil), t.GetData()...)), nil
	case *ort.Tensor[int8]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]int8(nil), t.GetData()...)), nil
	case *ort.Tensor[uint8]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]uint8(nil), t.GetData()...)), nil
	case *ort.Tensor[bool]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]bool(nil), t.GetData()...)), nil
	case *ort.Tensor[int16]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]int16(nil), t.GetData()...)), nil
	case *ort.Tensor[uint16]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]uint16(nil), t.GetData()...)), nil
	case *ort.Tensor[uint32]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]uint32(nil), t.GetData()...)), nil
	case *ort.Tensor[uint64]:
		return kernels.FromSlice(shapeOf(t.GetShape()), append([]uint64(nil), t.GetData()...)), nil
	case *ort.StringTensor:
		s, err := t.GetContents()
		if err != nil {
			return nil, err
		}
		out := kernels.New(graph.String, shapeOf(t.GetShape())...)
		copy(out.Raw().([]string), s)
		return out, nil
	case *ort.Scalar[float32]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[float64]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[int64]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[int32]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[int8]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[uint8]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.Scalar[bool]:
		return kernels.Scalar(t.GetData()), nil
	case *ort.CustomDataTensor:
		raw := t.GetData()
		shape := shapeOf(t.GetShape())
		n := 1
		for _, d := range shape {
			n *= d
		}
		for dt, et := range eightBit {
			if ort.TensorElementDataType(t.DataType()) == et {
				if len(raw) < n {
					return nil, fmt.Errorf("custom tensor has %d bytes for %d elements", len(raw), n)
				}
				out := kernels.New(dt, shape...)
				copy(out.Raw().([]uint8), raw)
				return out, nil
			}
		}
		if len(raw) < 2*n || n > 0 && len(raw) != 2*n {
			return nil, fmt.Errorf("custom tensor has %d bytes for %d elements", len(raw), n)
		}
		switch ort.TensorElementDataType(t.DataType()) {
		case ort.TensorElementDataTypeFloat16:
			d := make([]float16.Float16, n)
			for i := range d {
				d[i] = float16.Frombits(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
			}
			return kernels.FromSlice(shape, d), nil
		case ort.TensorElementDataTypeBFloat16:
			d := make([]graph.BF16, n)
			for i := range d {
				d[i] = graph.BF16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
			}
			return kernels.FromSlice(shape, d), nil
		}
	}
	return nil, fmt.Errorf("unsupported ONNX Runtime value %T", v)
}

// Values are the ONNX Runtime values of one run (inputs, and outputs for
// ONNX Runtime to write into), built once by PrepareValues so that
// RunValues times ONNX Runtime alone, without converting tensors (for
// benchmarks).
type Values struct {
	in, out []ort.Value
}

// PrepareValues converts inputs and makes output values of the shapes of
// like (onnxpe's outputs) for s's model.
func (s *Session) PrepareValues(inputs, like map[string]*kernels.Tensor) (*Values, error) {
	v := &Values{in: make([]ort.Value, len(s.inputs)), out: make([]ort.Value, len(s.outputs))}
	for i, name := range s.inputs {
		t, ok := inputs[name]
		if !ok {
			v.Close()
			return nil, fmt.Errorf("ortpeer: no value for input %q", name)
		}
		x, err := toORT(t)
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("ortpeer: input %q: %w", name, err)
		}
		v.in[i] = x
	}
	for i, name := range s.outputs {
		l, ok := like[name]
		if !ok {
			v.Close()
			return nil, fmt.Errorf("ortpeer: no shape for output %q", name)
		}
		t := kernels.New(l.DType, l.Shape...)
		touch(t)
		x, err := toORT(t)
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("ortpeer: output %q: %w", name, err)
		}
		v.out[i] = x
	}
	return v, nil
}

// touch writes to every page of t's buffer. A large buffer comes fresh
// from the operating system, its pages not yet mapped: without this the
// first write to each page, by ONNX Runtime inside a timed run, would pay
// a page fault (the 256 MB of a Llama's presents after a 4096-token cache
// took 0.1-0.4 s of a 40 ms decode step, in whichever run the Go heap
// happened to hand out fresh memory). A deployment reuses its buffers.
func touch(t *kernels.Tensor) {
	switch d := t.Raw().(type) {
	case []float32:
		touchPages(d)
	case []float64:
		touchPages(d)
	case []int64:
		touchPages(d)
	case []int32:
		touchPages(d)
	case []uint16:
		touchPages(d)
	case []float16.Float16:
		touchPages(d)
	case []graph.BF16:
		touchPages(d)
	case []uint8:
		touchPages(d)
	}
}

func touchPages[T any](d []T) {
	var zero T
	step := max(1, 4096/int(unsafe.Sizeof(zero)))
	for i := 0; i < len(d); i += step {
		d[i] = zero
	}
}

// RunValues runs the model on prepared values: one DynamicAdvancedSession
// call, nothing converted.
func (s *Session) RunValues(v *Values) error { return s.s.Run(v.in, v.out) }

// Close releases the values.
func (v *Values) Close() {
	for _, x := range slices.Concat(v.in, v.out) {
		destroy(x)
	}
}

// Output reads output i of the last RunValues.
func (v *Values) Output(i int) (*kernels.Tensor, error) { return fromORT(v.out[i]) }
