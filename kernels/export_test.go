package kernels

// Unfused returns o with decomposed attention chains run as written, not
// blockwise (for tests that compare the two).
func Unfused(o Options) Options {
	o.unfused = true
	return o
}
