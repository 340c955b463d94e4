// Package work is the normalised working copy of a model that detection
// reads: a clone of the model with functions inlined, constants folded,
// equivalent forms canonicalised (canon.go), shapes inferred with symbolic
// dimensions (shape.go, infer.go), the inputs' roles (roles.go) and sizes
// (sizes.go), and the map back to the original's nodes and values. The
// caller's model is never changed. It also holds the graph queries every
// analysis uses (cone.go, names.go, fusedops.go).
package work
