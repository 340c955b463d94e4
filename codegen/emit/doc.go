// Package emit is what a scheme's code generator is written with: the
// generation (Gen: the audit, the options, golden vectors run on the
// model's own subgraph), a finding's part (its template data, tables and
// what the report says of it), number formatting and rounding as the
// model rounds, and the transcription of frequency programs. Each scheme
// package's codegen.go uses it; package codegen renders the parts.
package emit
