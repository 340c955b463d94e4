// Package golden holds the expected `onnxpe audit --json` report of every
// model in testmodels/ (one JSON file per model), compared in tests and
// refreshed with `go test ./golden -update`.
//
// Until the audit command exists, the expectation is the ground truth of
// testmodels/manifest.json and of the Go-built models: the files are
// generated from it, and the test only checks that they still agree with
// it (a stand-in that guards the files, not a test of any detector). The
// audit's issue replaces the generator by `onnxpe audit --json` and keeps
// the files as the expectation.
package golden
