package verify

// SessionsMade is the number of onnxpe sessions verify has made in this
// process (for the test that a comparison makes one per model).
func SessionsMade() int64 { return goSessions.Load() }
