package complexorder

import (
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Scheme is complexorder's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Complex-order embeddings: each word a wave of amplitude, frequency and phase over the positions.

Complex-order word embeddings (Wang et al.): each word embedded as
amplitude·e^(i(ω·pos + θ)), its frequency (and phase) learned per word,
the real and imaginary parts the embedding.`,
	Rank:     4,
	Params:   &Params{},
	Detect:   Detect,
	Rewrites: nil,
	Extend:   nil,
	Lower:    nil,
}
