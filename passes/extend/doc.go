// Package extend is the extension's driver: it checks a request against
// the audit's findings, asks each scheme's extension (Scheme.Extend) to
// plan and apply it, and widens the other constants read at positions
// (causal masks, 0, 1, 2, ... buffers) by the rule their values follow.
// The checks of the result (the reference, the audit, runs at N) are the
// command's.
package extend
