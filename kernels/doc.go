// Package kernels is onnxpe's reference executor: a runtime tensor type,
// an op registry keyed by (domain, op type, opset range), plain Go kernels
// over typed slices, and a Session that runs a graph.Model (If/Loop/Scan
// bodies and model-local functions included).
//
// It exists so that other packages can evaluate models and subgraphs
// numerically: passes probe candidate subgraphs, verify runs an original and
// a rewritten model side by side, codegen computes golden vectors. Kernels
// favour clarity and exactness (Options.Accumulate64 sums in float64) over
// raw speed, although MatMul-like ops are blocked.
//
// Float16 and bfloat16 are computed per op in float32, as ONNX Runtime
// does: a kernel that is not Native sees float32 copies of its half
// inputs, and its float32 outputs of the op's type T (the type of input 0,
// of input 1 for Where; not the float32 statistics of the normalisations)
// are rounded to T at the end of the op. A kernel that computes in float32
// has so rounded twice (its float32 result, then to T), exactly as ONNX
// Runtime's float32-computing kernels do. Results computed in float64 are
// rounded to T once: Cast and CastLike from float64 and from integers,
// ALiBiBias, the normalisation statistics, and the
// element functions computed in float64 (their float32 result is rounded
// to odd, so that its rounding to T is that of the float64 value).
// LayerNormalization's Y, accumulated in float64, is rounded to float32 and
// then to T.
//
// A kernel panic is a defect of this package: Run returns it as an error
// wrapping ErrInternal (Options.PanicStacks or ONNXPE_DEBUG=1 prints its
// stack), also when it happens on a worker goroutine. Sizes a model
// computes are bounded: every tensor a kernel allocates passes one check
// of Options.MaxTensorBytes (Call.alloc and the helpers built on it), and
// Loop iterations are bounded by Options.MaxLoopIterations.
//
// A Session packs the constant weights of its matrix products once,
// recycles freed intermediates through a per-session buffer pool, counts
// the intermediate storage each run holds (Session.LastRunStats; views
// share storage and count once), and spreads large elementwise, softmax and
// normalisation work over Options.Threads goroutines.
//
// It is not a general ONNX runtime: it covers the ops that transformer
// exports and ONNX Runtime's optimizer produce (see the registry),
// including ONNX Runtime's attention and quantized-matrix contrib ops
// (GroupQueryAttention, MultiHeadAttention, Attention, QAttention,
// MatMulNBits, ...), not maps, strings, complex numbers or training ops,
// and it does no graph optimisation or shape inference. ONNX Runtime's
// generation loops (com.microsoft BeamSearch, GreedySearch, ...) are named
// in a clear error: they wrap a decoder model, which runs alone.
//
// The attention ops share one implementation (attention_core.go) that
// never holds a whole (query x key) score matrix: it works on blocks of
// query rows, all query heads of a key/value head at once.
//
// The fused ALiBi op of this project is documented at ALiBiBias.
package kernels
