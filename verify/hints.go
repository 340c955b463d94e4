package verify

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/work"
)

// roleOfAudit maps the audit's input roles to verify's. The audit's
// "content" (embeddings, pixels and KV caches alike) and "param" say less
// than verify's own analysis and are left to it.
var roleOfAudit = map[work.Role]Role{
	work.RoleTokens:    RoleTokenIDs,
	work.RoleTokenType: RoleTableIndex,
	work.RolePositions: RolePositionIDs,
	work.RoleMask:      RoleAttentionMask,
}

// AuditHints runs the audit (package passes) on m and turns its findings
// into suggestions: the roles of token, token-type, position and mask
// inputs (taken where verify's own analysis has no evidence or a tie),
// and the largest max_positions of its findings (a further candidate
// for the longest sequence). verify works without them.
func AuditHints(m *graph.Model) (Hints, error) {
	rep, ctx, err := audit.AuditModel(m, "", passes.Options{})
	if err != nil {
		return Hints{}, err
	}
	return HintsFromAudit(rep, ctx), nil
}

// HintsFromAudit are AuditHints of a model audited already (rep and ctx
// its audit's report and context): a command that audits a model and
// verifies it audits it once.
func HintsFromAudit(rep *passes.Report, ctx *passes.Context) Hints {
	h := Hints{Suggested: map[string]Role{}, From: "the audit"}
	if ctx != nil {
		if w, ok := passes.Ran(ctx, work.Normalize); ok && w != nil {
			for _, v := range w.Inputs() {
				if r, ok := roleOfAudit[w.Role(v)]; ok {
					h.Suggested[v.Name] = r
				}
			}
		}
	}
	for _, f := range rep.Findings {
		if n := maxPositionsOf(f.Params); n > h.SuggestedMaxPositions {
			h.SuggestedMaxPositions = n
		}
	}
	return h
}

// maxPositionsOf is the max_positions a finding's params print (the
// vocabulary's key: a stored table's rows), 0 when they print none.
func maxPositionsOf(p passes.Params) int {
	if p == nil {
		return 0
	}
	n, _ := p.Map()["max_positions"].(int)
	return n
}
