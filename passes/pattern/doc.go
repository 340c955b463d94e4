// Package pattern is a small language of graph patterns: a pattern
// matches the value a node computes, with named captures of values and
// nodes, commutative operands matched both ways, reusable sub-patterns,
// and checks that say why they failed; a failed match returns the reason
// of the attempt that got furthest. Structure names a form; numbers (the
// probes) decide detection.
package pattern
