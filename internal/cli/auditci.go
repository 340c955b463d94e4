package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/onnxpe/onnxpe/internal/atomicfile"
	"github.com/onnxpe/onnxpe/internal/junit"
)

// unknownScheme is the scheme of a finding the audit could not decide
// (what it saw, and where, in its notes): SARIF reports each one.
const unknownScheme = "unknown"

// sarifSchemaURI is where the SARIF 2.1.0 schema is published.
const sarifSchemaURI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

// The SARIF rules of the audit: one per policy flag, one for findings
// whose scheme is unknown, and the notification of a model that could
// not be audited.
var sarifRules = []sarifRule{
	{ID: "onnxpe/require", Name: "RequiredSchemeMissing", level: "error",
		short: "A model lacks a positional-encoding scheme that --require asks for.",
		full:  "onnxpe audit --require SCHEME: every model audited must use SCHEME in at least one attention layer; this model's audit did not find it."},
	{ID: "onnxpe/forbid", Name: "ForbiddenSchemeFound", level: "error",
		short: "A model uses a positional-encoding scheme that --forbid rules out.",
		full:  "onnxpe audit --forbid SCHEME: no model audited may use SCHEME; this model's audit found it."},
	{ID: "onnxpe/max-positions-at-least", Name: "TooFewPositions", level: "error",
		short: "A learned table or stored cache holds fewer positions than --max-positions-at-least asks for.",
		full:  "onnxpe audit --max-positions-at-least N: an encoding with a stored table (learned positions, a cos/sin cache) must hold at least N positions; this one holds fewer."},
	{ID: "onnxpe/known", Name: "UnknownUnderPolicy", level: "error",
		short: "A policy was given and the audit could not tell a model's positional encoding.",
		full:  "Policies (--require, --forbid, --max-positions-at-least) fail closed: a model with a finding of scheme unknown breaks them, since they cannot be shown to hold, unless --allow-unknown is given."},
	{ID: "onnxpe/unknown-encoding", Name: "UnknownEncoding", level: "warning",
		short: "The audit could not decide a positional encoding.",
		full:  "A finding of scheme unknown: the audit saw something it could not confirm as any scheme (no attention block found, a probe that could not run, position-dependent scores that fit no scheme). Its notes say what and where."},
	{ID: "onnxpe/unreadable-model", Name: "UnreadableModel", level: "error",
		short: "A model could not be audited.",
		full:  "The file could not be read as a model (truncated, corrupt, unsafe) or its audit failed; the other models were audited."},
}

type sarifRule struct {
	ID, Name           string
	level, short, full string
}

func sarifRuleIndex(id string) int {
	for i, r := range sarifRules {
		if r.ID == id {
			return i
		}
	}
	panic("cli: no SARIF rule " + id)
}

// writeCIFiles writes --sarif and --junit, when given.
func writeCIFiles(opts *auditOptions, results []*auditResult, violations []violation, exit int) error {
	for _, out := range []struct {
		path  string
		write func() ([]byte, error)
	}{
		{opts.SARIF, func() ([]byte, error) { return auditSARIF(results, violations, exit) }},
		{opts.JUnit, func() ([]byte, error) { return auditJUnit(opts.policies(), results, violations) }},
	} {
		if out.path == "" {
			continue
		}
		b, err := out.write()
		if err != nil {
			return err
		}
		if err := commit(opts.ctx, out.path, func() error { return atomicfile.WriteFile(out.path, b) }); err != nil {
			return badInput("%s: %v", out.path, err)
		}
	}
	return nil
}

// sarifURI is a model path as a SARIF artifact URI: relative paths (to
// the working folder, %SRCROOT%) with forward slashes, absolute ones as
// file URIs.
func sarifURI(path string) (uri string, base bool) {
	if filepath.IsAbs(path) {
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String(), false
	}
	return (&url.URL{Path: filepath.ToSlash(filepath.Clean(path))}).String(), true
}

type sarifObj = map[string]any

func sarifLocation(path string) sarifObj {
	uri, base := sarifURI(path)
	loc := sarifObj{"uri": uri}
	if base {
		loc["uriBaseId"] = "%SRCROOT%"
	}
	// A model is a binary file: its result sits at its first line, where
	// code scanning can show it.
	return sarifObj{"physicalLocation": sarifObj{"artifactLocation": loc, "region": sarifObj{"startLine": 1}}}
}

// fingerprint keeps a result the same result from run to run (rule,
// file, what it is about), as code scanning matches them.
func fingerprint(parts ...string) sarifObj {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return sarifObj{"onnxpe/v1": hex.EncodeToString(h[:16])}
}

// auditSARIF is the SARIF 2.1.0 log of an audit: one result per policy
// violation and per finding of scheme unknown (its notes the message),
// each located at its model file; models that could not be audited are
// notifications of the invocation, whose exit code is exit.
func auditSARIF(results []*auditResult, violations []violation, exit int) ([]byte, error) {
	rules := make([]sarifObj, len(sarifRules))
	for i, r := range sarifRules {
		rules[i] = sarifObj{"id": r.ID, "name": r.Name,
			"shortDescription":     sarifObj{"text": r.short},
			"fullDescription":      sarifObj{"text": r.full},
			"defaultConfiguration": sarifObj{"level": r.level},
			"helpUri":              "https://github.com/onnxpe/onnxpe#auditing-many-models"}
	}
	out := []sarifObj{}
	result := func(rule, path, message string, props sarifObj, key ...string) {
		i := sarifRuleIndex(rule)
		out = append(out, sarifObj{"ruleId": rule, "ruleIndex": i, "level": sarifRules[i].level,
			"message": sarifObj{"text": message}, "locations": []sarifObj{sarifLocation(path)},
			"partialFingerprints": fingerprint(append([]string{rule, filepath.ToSlash(path)}, key...)...),
			"properties":          props})
	}
	for _, v := range violations {
		props := sarifObj{"policy": v.Policy.String()}
		key := []string{v.Policy.String()}
		if v.Finding != nil {
			props["scheme"], props["layers"] = v.Finding.Scheme, nonNil(v.Finding.Layers)
			key = append(key, v.Finding.Scheme, layerRange(v.Finding.Layers))
		}
		result("onnxpe/"+v.Policy.Flag, v.Path, v.Message, props, key...)
	}
	var notes []sarifObj
	for _, r := range results {
		if r.err != nil {
			notes = append(notes, sarifObj{"level": "error", "message": sarifObj{"text": oneLine(r.err.Error())},
				"locations":  []sarifObj{sarifLocation(r.path)},
				"descriptor": sarifObj{"id": "onnxpe/unreadable-model", "index": sarifRuleIndex("onnxpe/unreadable-model")}})
			continue
		}
		for _, f := range r.report.Findings {
			if f.Scheme != unknownScheme {
				continue
			}
			msg := strings.Join(f.Notes, "; ")
			if msg == "" {
				msg = "the audit could not decide the positional encoding"
			}
			where := "layers " + layersWhere(f)
			if len(f.Layers) == 0 {
				where = "no attention layer"
			}
			result("onnxpe/unknown-encoding", r.path, fmt.Sprintf("%s: %s: %s", r.report.Model, where, msg),
				sarifObj{"scheme": f.Scheme, "layers": nonNil(f.Layers)}, layerRange(f.Layers), f.Subgraph)
		}
	}
	invocation := sarifObj{"executionSuccessful": exit != ExitInternal, "exitCode": exit}
	if notes != nil {
		invocation["toolExecutionNotifications"] = notes
	}
	run := sarifObj{
		"tool": sarifObj{"driver": sarifObj{"name": "onnxpe", "version": readVersion().Version,
			"informationUri": "https://github.com/onnxpe/onnxpe", "rules": rules}},
		"invocations": []sarifObj{invocation},
		"results":     out,
	}
	if wd, err := os.Getwd(); err == nil {
		base := (&url.URL{Scheme: "file", Path: filepath.ToSlash(wd)}).String()
		run["originalUriBaseIds"] = sarifObj{"%SRCROOT%": sarifObj{"uri": strings.TrimSuffix(base, "/") + "/"}}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	err := enc.Encode(sarifObj{"$schema": sarifSchemaURI, "version": "2.1.0", "runs": []sarifObj{run}})
	return buf.Bytes(), err
}

func nonNil(ls []int) []int {
	if ls == nil {
		return []int{}
	}
	return ls
}

// auditJUnit is the JUnit report of an audit's policies: one test case
// per model and policy (one "audit" case per model when no policy is
// given), failed when the model breaks the policy, in error when the
// model could not be audited.
func auditJUnit(policies []policy, results []*auditResult, violations []violation) ([]byte, error) {
	suite := junit.Suite{Name: "onnxpe audit", Time: "0"}
	names := []string{"audit"}
	if len(policies) > 0 {
		names = names[:0]
		for _, p := range policies {
			names = append(names, p.String())
		}
	}
	for _, r := range results {
		for i, name := range names {
			c := junit.Case{Name: r.path + ": " + name, Classname: "onnxpe.audit", Time: "0"}
			switch {
			case r.err != nil:
				c.Error = &junit.Message{Message: oneLine(r.err.Error()), Type: "unreadable"}
				suite.Errors++
			default:
				c.SystemOut = fmt.Sprintf("%s: %s (%d attention layers)\n", r.report.Model, strings.Join(r.report.Schemes, ", "), len(r.report.Layers))
				var msgs []string
				for _, v := range violations {
					if len(policies) > 0 && v.Path == r.path && v.Policy == policies[i] {
						msgs = append(msgs, v.Message)
					}
				}
				if len(msgs) > 0 {
					c.Failure = &junit.Message{Message: strings.Join(msgs, "; "), Type: "policy", Text: strings.Join(msgs, "\n")}
					suite.Fails++
				}
			}
			suite.Cases = append(suite.Cases, c)
		}
	}
	suite.Tests = len(suite.Cases)
	var buf bytes.Buffer
	err := junit.Write(&buf, &junit.Suites{Name: "onnxpe audit", Tests: suite.Tests, Fails: suite.Fails, Errors: suite.Errors, Time: "0", Suites: []junit.Suite{suite}})
	return buf.Bytes(), err
}
