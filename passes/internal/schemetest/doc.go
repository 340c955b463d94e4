// Package schemetest is the test support of the passes packages: builders
// of small models in the forms exporters write (Builder and Form, Net for
// the fused deployment forms, Env and ExporterForm for one-block variants
// of other exporters), a helper that runs one scheme's detector alone and
// returns its findings with the near-misses the trace recorded, and the
// comparison of a scheme's findings with the golden reports of the corpus
// (golden/testdata/<model>.json).
//
// It is imported by tests only (internal/depgraph's test enforces it):
// the tool never builds models, and nothing here is part of the audit.
package schemetest
