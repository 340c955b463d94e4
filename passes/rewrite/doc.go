// Package rewrite is what the rewrite and extension passes edit a model
// with: a copy in which every node keeps its name until a pass replaces
// it (Rewrite: the graph builder, constants shared by content, the
// removal of what an edit left unused), the record of each pass's change,
// the one skeleton every rewrite pass runs its findings through
// (skeleton.go), the opset upgrade for standard fused ops (opset.go), and
// the records of an extension (extend.go). Run runs rewrite passes in the
// context of a model's audit.
package rewrite
