package kernels

import (
	"fmt"
	"strings"
	"sync"

	"github.com/onnxpe/onnxpe/graph"
)

// The inputs each registered op takes, checked when a session is made:
// a node with too few or too many inputs, or without a required one, is
// an error of the model (kernels index their required inputs directly).
//
// A spec has one letter per input position: 'r' a required tensor, 'o' an
// optional one (absent or an empty name), 'R' and 'O' the same for inputs
// that may also be sequences or optionals; then optionally '+' (the last
// letter repeats: any number of further inputs of its kind) or '*' (any
// number of further present inputs of any kind). Absent inputs past the
// spec are accepted (exporters write trailing empty names). A sequence or
// optional fed to a tensor input is an error of the node when it runs.

// aritySpec is the spec of an op from opset since on.
type aritySpec struct {
	since int64
	spec  string
}

var (
	arityMu sync.RWMutex
	arities = map[opKey][]aritySpec{}
)

// SetInputs declares the inputs of op in domain from opset since on (see
// the letters above); later declarations of higher since values take over
// from their opset. Every registered op must have one (a test checks):
// call it next to Register.
func SetInputs(domain, op string, since int64, spec string) {
	if strings.Trim(spec, "roRO+*") != "" || strings.ContainsAny(spec, "+*") && strings.IndexAny(spec, "+*") != len(spec)-1 {
		panic(fmt.Sprintf("kernels: SetInputs %s.%s: bad spec %q", domain, op, spec))
	}
	k := opKey{normDomain(domain), op}
	arityMu.Lock()
	defer arityMu.Unlock()
	l := append(arities[k], aritySpec{since, spec})
	for i := len(l) - 1; i > 0 && l[i].since < l[i-1].since; i-- {
		l[i], l[i-1] = l[i-1], l[i]
	}
	arities[k] = l
}

// inputSpec returns the spec of op at opset, and whether there is one.
func inputSpec(domain, op string, opset int64) (string, bool) {
	arityMu.RLock()
	defer arityMu.RUnlock()
	l := arities[opKey{normDomain(domain), op}]
	spec, ok := "", false
	for _, a := range l {
		if a.since <= opset {
			spec, ok = a.spec, true
		}
	}
	return spec, ok
}

// checkInputs checks n's inputs against the spec of its op at opset.
func checkInputs(n *graph.Node, opset int64) error {
	spec, ok := inputSpec(n.Domain, n.OpType, opset)
	if !ok {
		return nil
	}
	ins := n.Inputs()
	fixed := strings.TrimRight(spec, "+*")
	for i, v := range ins {
		switch kind := specKind(spec, i); {
		case kind == 0 && v != nil:
			return fmt.Errorf("%d inputs: %s takes %s", len(ins), opName(n), describeSpec(spec))
		case (kind == 'r' || kind == 'R') && v == nil:
			return fmt.Errorf("input %d is absent: %s takes %s", i, opName(n), describeSpec(spec))
		}
	}
	if need := strings.LastIndexAny(fixed, "rR") + 1; len(ins) < need {
		return fmt.Errorf("%d inputs: %s takes %s", len(ins), opName(n), describeSpec(spec))
	}
	return nil
}

// specKind is the letter of spec for input i ('R' for the inputs '*'
// adds), or 0 past the spec.
func specKind(spec string, i int) byte {
	fixed, rest := spec, byte(0)
	if l := len(spec); l > 0 && (spec[l-1] == '+' || spec[l-1] == '*') {
		fixed, rest = spec[:l-1], spec[l-1]
	}
	switch {
	case i < len(fixed):
		return fixed[i]
	case rest == '+' && len(fixed) > 0:
		return fixed[len(fixed)-1]
	case rest == '*':
		return 'R'
	}
	return 0
}

// checkTensorInputs fails when a sequence reaches an input of st that
// takes tensors only.
func checkTensorInputs(st *step, ins []*Tensor) error {
	if !st.hasSpec {
		return nil
	}
	for i, t := range ins {
		if t.notTensor() {
			if k := specKind(st.spec, i); k != 'R' && k != 'O' {
				return fmt.Errorf("input %d is a sequence or an optional; %s takes a tensor there", i, opName(st.node))
			}
		}
	}
	return nil
}

// describeSpec says in words what a spec asks for.
func describeSpec(spec string) string {
	req := strings.Count(spec, "r") + strings.Count(spec, "R")
	opt := strings.Count(spec, "o") + strings.Count(spec, "O")
	switch {
	case strings.HasSuffix(spec, "+") || strings.HasSuffix(spec, "*"):
		return fmt.Sprintf("at least %d inputs", req)
	case opt == 0:
		return fmt.Sprintf("%d inputs", req)
	}
	return fmt.Sprintf("%d to %d inputs", req, req+opt)
}

func init() {
	on := func(op, spec string) { SetInputs("", op, 1, spec) }
	for _, op := range strings.Fields(`Abs Acos Acosh ArgMax ArgMin Asin Asinh Atan Atanh Cast Ceil
		ConstantOfShape Cos Cosh Elu Erf Exp Flatten Floor Gelu HardSigmoid
		HardSwish If IsInf IsNaN LeakyRelu Log LogSoftmax Neg Not Reciprocal Relu Round
		Selu Shape Sigmoid Sign Sin Sinh Size Softmax Softplus Softsign Sqrt Tan
		Tanh ThresholdedRelu Transpose`) {
		on(op, "r")
	}
	for _, op := range strings.Fields(`Add And CastLike CumSum Div Equal Expand Gather
		GatherElements GatherND Greater GreaterOrEqual Less LessOrEqual MatMul Mod Mul Or Pow
		Sub Tile Xor`) {
		on(op, "rr")
	}
	for _, op := range strings.Fields(`Range ScatterElements ScatterND Where`) {
		on(op, "rrr")
	}
	for _, op := range strings.Fields(`Concat Einsum Max Mean Min SequenceConstruct Sum`) {
		on(op, "r+")
	}
	on("Identity", "R")
	on("Scan", "oR+") // opset 8: sequence_lens first
	SetInputs("", "Scan", 9, "R+")
	on("SequenceAt", "Rr")
	on("SequenceLength", "R")
	on("ConcatFromSequence", "R")
	on("Constant", "")
	on("SequenceEmpty", "")
	on("Conv", "rro")
	on("Gemm", "rro")
	on("LayerNormalization", "rro")
	on("Loop", "oo*")
	on("RotaryEmbedding", "rrro")
	on("SequenceErase", "Ro")
	on("SequenceInsert", "Rro")
	on("SimplifiedLayerNormalization", "ro")
	on("Split", "ro")
	on("SplitToSequence", "ro")
	on("Trilu", "ro")
	on("Clip", "r")
	SetInputs("", "Clip", 11, "roo")
	on("Dropout", "r")
	SetInputs("", "Dropout", 12, "roo")
	on("Pad", "r")
	SetInputs("", "Pad", 11, "rro")
	SetInputs("", "Pad", 18, "rroo")
	on("Reshape", "r")
	SetInputs("", "Reshape", 5, "rr")
	on("Slice", "r")
	SetInputs("", "Slice", 10, "rrroo")
	on("Squeeze", "r")
	SetInputs("", "Squeeze", 13, "ro")
	on("Unsqueeze", "r")
	SetInputs("", "Unsqueeze", 13, "rr")
	on("TopK", "r")
	SetInputs("", "TopK", 10, "rr")
	on("ReduceSum", "r")
	SetInputs("", "ReduceSum", 13, "ro")
	for _, op := range strings.Fields(`ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax
		ReduceMean ReduceMin ReduceProd ReduceSumSquare`) {
		on(op, "r")
		SetInputs("", op, 18, "ro")
	}

	ms := func(op, spec string) { SetInputs(DomainMicrosoft, op, 1, spec) }
	ms("Attention", "rrooooo")
	ms("BiasAdd", "rrr")
	ms("BiasGelu", "rr")
	ms("DynamicQuantizeMatMul", "rrroo")
	ms("EmbedLayerNormalization", "rorrorooo")
	ms("FastGelu", "ro")
	ms("FusedMatMul", "rr")
	ms("Gelu", "r")
	ms("GemmFastGelu", "rro")
	ms("GroupQueryAttention", "roooorrooooo")
	ms("MatMulIntegerToFloat", "rrrrooo")
	ms("MatMulNBits", "rrrooo")
	ms("MultiHeadAttention", "rooooooooo")
	ms("QAttention", "rrrrroooo")
	ms("QuickGelu", "r")
	ms("RelativePositionBias", "rrr")
	ms("RotaryEmbedding", "rrrr")
	ms("SimplifiedLayerNormalization", "ro")
	ms("SkipLayerNormalization", "rrroo")
	ms("SkipSimplifiedLayerNormalization", "rrro")
	SetInputs(DomainOnnxpe, "ALiBiBias", 1, "rrr")

	// Ops of ONNX's later opsets, the preview domain and the remaining
	// contrib ops (ONNX's operator schemas; the newest ops as their
	// kernels read them).
	for _, op := range strings.Fields(`AveragePool BitCast BitwiseNot BlackmanWindow Celu
		DepthToSpace Det DynamicQuantizeLinear EyeLike GlobalAveragePool GlobalLpPool
		GlobalMaxPool HammingWindow HannWindow Hardmax LRN LpNormalization LpPool MaxPool
		MeanVarianceNormalization Mish NonZero Shrink SpaceToDepth Swish Unique`) {
		on(op, "r")
	}
	for _, op := range strings.Fields(`AffineGrid BitShift BitwiseAnd BitwiseOr BitwiseXor
		CenterCropPad Compress CumProd GridSample PRelu ReverseSequence RMSNormalization
		SwiGLU`) {
		on(op, "rr")
	}
	for _, op := range strings.Fields(`Col2Im GroupNormalization InstanceNormalization OneHot
		RoiAlign Scatter`) {
		on(op, "rrr")
	}
	on("Attention", "rrroooo")
	on("BatchNormalization", "rrrrr")
	on("CausalConvWithState", "rroo")
	on("ConvInteger", "rroo")
	on("ConvTranspose", "rro")
	on("DFT", "roo")
	on("DeformConv", "rrroo")
	on("DequantizeLinear", "rro")
	on("GRU", "rrrooo")
	on("LSTM", "rrrooooo")
	on("LinearAttention", "rrrooo")
	on("MatMulInteger", "rroo")
	on("MaxUnpool", "rro")
	on("MelWeightMatrix", "rrrrr")
	on("NegativeLogLikelihoodLoss", "rro")
	on("NonMaxSuppression", "rrooo")
	on("Optional", "O")
	on("OptionalGetElement", "R")
	on("OptionalHasElement", "O")
	on("QLinearConv", "rrrrrrrro")
	on("QLinearMatMul", "rrrrrrrr")
	on("QuantizeLinear", "rro")
	on("RNN", "rrrooo")
	on("Resize", "rr")
	SetInputs("", "Resize", 11, "rooo")
	on("STFT", "rroo")
	on("SequenceMap", "R*")
	on("SoftmaxCrossEntropyLoss", "rro")
	on("TensorScatter", "rro")
	on("Upsample", "r")
	SetInputs("", "Upsample", 9, "rr")
	SetInputs("ai.onnx.preview", "FlexAttention", 1, "rrr")
	on("Bernoulli", "r")
	on("RandomNormal", "")
	on("RandomUniform", "")
	on("RandomNormalLike", "r")
	on("RandomUniformLike", "r")
	for _, op := range strings.Fields(`Binarizer LabelEncoder TreeEnsemble`) {
		SetInputs("ai.onnx.ml", op, 1, "r")
	}
	SetInputs("ai.onnx.ml", "ArrayFeatureExtractor", 1, "rr")
}
