// Package passes is the framework of onnxpe's analyses and rewrites, in
// the shape of golang.org/x/tools/go/analysis: every analysis is a
// Pass[T], a package-level value with a name, a doc, the passes it
// requires and a Run returning a T; Run and Context.Run run passes in
// dependency order, each once per context, and Result gives a pass the
// result of one it requires, typed (reading one it does not require is a
// defect, reported by a panic).
//
// The unit of knowledge is a Finding: a scheme, the attention layers it
// reaches, the original nodes that carry it, its params in the vocabulary
// of DESIGN.md (what reports print) and typed evidence (what rewrites,
// codegen and plots use without detecting again). A Report is the audit of
// one model (report.schema.json, embedded as ReportSchema).
//
// What the framework runs lives in its subpackages: the working copy
// (passes/work), the pattern language (passes/pattern), probes
// (passes/probe), attention blocks (passes/attn), the rewrite builder
// (passes/rewrite), one package per scheme (passes/scheme/...), their list
// (passes/schemes) and the drivers (passes/audit, passes/extend).
// Detection never changes the caller's model, and names of nodes and
// values, producer strings and metadata are never evidence.
package passes
