// Package schemes is the list of every positional-encoding scheme onnxpe
// knows, in one place (as go vet's main lists its analyzers): the audit's
// detectors, rewrite's passes and their --passes names, extend's
// dispatch, unfuse's lowerers and the report schema's scheme names are
// read from it. Adding a scheme is adding its package to All.
package schemes

import (
	"slices"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
	"github.com/onnxpe/onnxpe/passes/scheme/unknown"
)

// All are the schemes, in the order their detectors run and their
// findings are reported when nothing else orders them.
var All = []*scheme.Scheme{
	rope.Scheme,
	sinusoidal.Scheme,
	learned.Scheme,
	alibi.Scheme,
	t5.Scheme,
	shaw.Scheme,
	relsin.Scheme,
	disentangled.Scheme,
	complexorder.Scheme,
	floater.Scheme,
	nope.Scheme,
	unknown.Scheme,
}

// Names are the names of the schemes, in the list's order.
func Names() []string {
	out := make([]string, len(All))
	for i, s := range All {
		out[i] = s.Name
	}
	return out
}

// Lookup is the scheme named name, nil when there is none.
func Lookup(name string) *scheme.Scheme {
	i := slices.IndexFunc(All, func(s *scheme.Scheme) bool { return s.Name == name })
	if i < 0 {
		return nil
	}
	return All[i]
}

// Detectors are the schemes' detectors, in the list's order.
func Detectors() []*passes.Pass[[]*passes.Finding] {
	var out []*passes.Pass[[]*passes.Finding]
	for _, s := range All {
		if s.Detect != nil {
			out = append(out, s.Detect)
		}
	}
	return out
}

// Rewrites are the schemes' rewrite passes, in the order they run by
// default, with their --passes names.
func Rewrites() []scheme.Rewrite {
	var out []scheme.Rewrite
	for _, s := range All {
		out = append(out, s.Rewrites...)
	}
	return out
}

// Rewriters are the rewrite passes of Rewrites.
func Rewriters() []*passes.Pass[*rewrite.Change] {
	var out []*passes.Pass[*rewrite.Change]
	for _, r := range Rewrites() {
		out = append(out, r.Pass)
	}
	return out
}

// Rewriter is the rewrite pass --passes names name, nil when none is.
func Rewriter(name string) *passes.Pass[*rewrite.Change] {
	for _, r := range Rewrites() {
		if r.Name == name {
			return r.Pass
		}
	}
	return nil
}
