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
// stack), also when it happens on a worker goroutine. The same recovery
// serves goroutines outside the kernels: Group (errgroup's Go and Wait)
// and Catch return a panic as a *PanicError wrapping ErrInternal, with
// the stack of the goroutine that panicked. What a model can get
// wrong is an error of the node instead: NewSession checks each node's
// inputs against its op's input spec (SetInputs: how many, which are
// optional, which may be sequences), and a kernel handed an element type
// it is not written for (Data[T] of another type) fails with
// ErrUnsupportedType. FuzzRun feeds the executor random graphs of every
// registered op to keep it so. Sizes a model computes are bounded: every
// tensor a kernel allocates passes one check of Options.MaxTensorBytes
// (Call.alloc and the helpers built on it), and Loop iterations are
// bounded by Options.MaxLoopIterations.
//
// A Session packs the constant weights of its matrix products once,
// recycles freed intermediates through a per-session buffer pool, counts
// the intermediate storage each run holds (Session.LastRunStats; views
// share storage and count once), and spreads large elementwise, softmax and
// normalisation work over Options.Threads goroutines.
//
// It covers every op of the default domain that ONNX's backend tests
// (1.23.0-dev, opsets up to 28) exercise, but the training ops (Adagrad,
// Adam, Momentum, Gradient), the string-processing ops (StringNormalizer,
// StringSplit, StringConcat, RegexFullMatch, TfIdfVectorizer) and
// ImageDecoder: besides the transformer core (matrix products, attention
// 23/24 and its relatives LinearAttention, FlexAttention,
// CausalConvWithState, SwiGLU, RMSNormalization, RotaryEmbedding), the
// convolutional family (Conv, ConvTranspose, DeformConv, Col2Im, pooling,
// the normalisations, Resize, GridSample, AffineGrid, RoiAlign,
// NonMaxSuppression), recurrent layers (RNN, GRU, LSTM), signal ops (DFT,
// STFT, windows, MelWeightMatrix), quantisation (QuantizeLinear and
// DequantizeLinear per tensor, axis or block, the integer and QLinear
// products), losses, bitwise ops, random ops (MT19937 as numpy's
// RandomState, so seeded nodes reproduce ONNX's reference), sequences
// and optionals, and the ai.onnx.ml ops of the backend tests
// (LabelEncoder, TreeEnsemble, Binarizer, ArrayFeatureExtractor); and
// ONNX Runtime's attention and quantized-matrix contrib ops
// (GroupQueryAttention, MultiHeadAttention, Attention, QAttention,
// MatMulNBits, ...). Tensors hold every numeric element type: the 8-bit
// floats, float4e2m1 and the 4-bit and 2-bit integers one element a byte,
// taken only by the ops whose schema allows them (casts, quantisation,
// data movement); strings only by Cast, Equal and LabelEncoder (and the
// ops that pass values along). It holds no maps, sparse tensors or
// complex numbers, and it does no graph optimisation or shape inference.
// ONNX Runtime's generation loops (com.microsoft BeamSearch,
// GreedySearch, ...) are named in a clear error: they wrap a decoder
// model, which runs alone.
//
// The attention ops share one implementation (attention_core.go) that
// never holds a whole (query x key) score matrix: it works on blocks of
// query rows, all query heads of a key/value head at once.
//
// The fused ALiBi op of this project is documented at ALiBiBias.
package kernels
