// Package floater is FLOATER (Liu et al.): positions as the states of a
// learned dynamical system integrated by an ODE solver, added to the
// embeddings or to each layer's q, k and v.
//
// Recognised forms (detect.go): position-only values read from one table
// of states shared by the layers, the states computed by a chain of solver
// steps (unrolled), a Loop whose body is a step, or stored; the tableau and
// the step read exactly from one step's arithmetic.
//
// rewrite.go stores the states as a table; extend.go refuses to continue
// an integration over a fixed number of positions; codegen.go writes the
// table and the biases of each layer.
package floater
