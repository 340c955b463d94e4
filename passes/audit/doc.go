// Package audit is the audit's driver: the audit pass collects the
// findings of every scheme's detector (passes/schemes) into the report,
// gives each attention block the scheme that reaches it (nope where none
// does), joins the audits of the graphs generation ops run, and orders the
// findings. AuditModel audits a model; its report and context are what
// rewrite, extend, verify's hints and codegen read afterwards.
package audit
