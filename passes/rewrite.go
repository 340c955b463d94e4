package passes

// RewriteOptions configure the rewrite passes (the flags of onnxpe rewrite).
type RewriteOptions struct {
	// MaxPositions is the number of positions of the tables and caches the
	// rewrites store: 0 takes the model's own table size, and
	// DefaultMaxPositions when it has none.
	MaxPositions int
	// RoPEOp is the RotaryEmbedding the RoPE rewrite emits: RoPEOpMicrosoft
	// (default; ONNX Runtime runs it at any opset) or RoPEOpONNX (the
	// standard op of opset 23; the model is upgraded to opset 23).
	RoPEOp string
	// ALiBi is ALiBiFold (default: constants and the smallest subgraph) or
	// ALiBiFuse (one ai.onnxpe ALiBiBias node).
	ALiBi string
	// T5Op is T5Table (default: a precomputed table gathered by relative
	// positions) or T5Microsoft (com.microsoft RelativePositionBias).
	T5Op string
	// Attention is AttentionKeep (default: the attention blocks stay as
	// they are, their encodings rewritten) or AttentionFused (each block
	// whose encoding the audit found becomes, with it, one deployed
	// attention op where the op expresses it: RoPE decoders
	// com.microsoft GroupQueryAttention with do_rotary).
	Attention string
	// AddKVCache gives a model exported without a KV cache one (with
	// AttentionFused): every attention block's op takes past key/value
	// inputs and returns the present ones, the padding mask is read over
	// past and new tokens, and the model decodes token by token. The
	// rewrite refuses it (KVCacheRefused) when some block is not fused or
	// something outside the blocks counts positions.
	AddKVCache bool
}

// Values of RewriteOptions.
const (
	RoPEOpMicrosoft = "com.microsoft"
	RoPEOpONNX      = "onnx"
	ALiBiFold       = "fold"
	ALiBiFuse       = "fuse"
	T5Table         = "table"
	T5Microsoft     = "com.microsoft"
	AttentionKeep   = "keep"
	AttentionFused  = "fused"
	// DefaultMaxPositions sizes caches and tables of encodings computed in
	// the graph, which no stored table bounds.
	DefaultMaxPositions = 4096
)
