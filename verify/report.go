package verify

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/onnxpe/onnxpe/internal/junit"
)

// summarize is the one-line verdict of a report.
func summarize(r *Report) string {
	n, bad := 0, 0
	names, pairings := map[string]bool{}, map[string]bool{}
	for _, s := range r.Sets {
		n++
		if !s.Equal {
			bad++
		}
		names[s.Name] = true
		pairings[s.Pairing] = true
	}
	what := "models A and B"
	if r.Reference {
		what = "model A and the reference outputs"
	}
	if bad == 0 {
		msg := fmt.Sprintf("equal: %s agree on %d input set%s", what, len(names), plural(len(names)))
		if len(pairings) > 1 {
			msg += fmt.Sprintf(" in %d runtime pairings", len(pairings))
		}
		return msg
	}
	// Name the first difference: the set, the output, where.
	for _, s := range r.Sets {
		if s.Equal {
			continue
		}
		if s.Error != "" {
			return fmt.Sprintf("not equal: %d of %d input sets differ; %s [%s]: %s", bad, n, s.Name, s.Pairing, s.Error)
		}
		for _, o := range s.Outputs {
			if o.Equal {
				continue
			}
			return fmt.Sprintf("not equal: %d of %d input sets differ; first: %s [%s] output %s %s", bad, n, s.Name, s.Pairing, o.Name, describeMismatch(o))
		}
	}
	return fmt.Sprintf("not equal: %d of %d input sets differ", bad, n)
}

// describeMismatch says where an output differs.
func describeMismatch(o OutputDiff) string {
	if o.Problem != "" {
		return o.Problem
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d element%s outside %v", o.Mismatches, plural(o.Mismatches), o.Tolerance)
	if f := o.FirstMismatch; f != nil && f.Position != nil {
		fmt.Fprintf(&b, ", from position %d", *f.Position)
	}
	if w := o.Worst; w != nil {
		fmt.Fprintf(&b, ", worst at %v", w.Index)
		if w.Position != nil {
			fmt.Fprintf(&b, " (position %d)", *w.Position)
		}
		fmt.Fprintf(&b, ": %.6g vs %.6g", float64(w.A), float64(w.B))
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// WriteTable prints the report for people: one row per output and set.
func (r *Report) WriteTable(w io.Writer) error {
	if r.Reference {
		fmt.Fprintf(w, "A: %s\nreference: %s\n", r.A, r.B)
	} else {
		fmt.Fprintf(w, "A: %s\nB: %s\n", r.A, r.B)
	}
	if an := r.Analysis; an != nil {
		var roles []string
		for _, in := range an.Inputs {
			s := fmt.Sprintf("%s=%s", in.Name, in.Role)
			if in.Rows > 0 {
				s += fmt.Sprintf("(%d rows)", in.Rows)
			}
			roles = append(roles, s)
		}
		fmt.Fprintf(w, "inputs: %s\n", strings.Join(roles, ", "))
		if an.MaxLength > 0 {
			fmt.Fprintf(w, "longest sequence: %d, %s\n", an.MaxLength, an.MaxLengthFrom)
		}
		if an.MaxPosition > 0 {
			fmt.Fprintf(w, "largest position: %d\n", an.MaxPosition)
		}
	}
	var tols []string
	for dt, t := range r.Tolerances {
		if t != (Tolerance{}) {
			tols = append(tols, fmt.Sprintf("%s %v", dt, t))
		}
	}
	sort.Strings(tols)
	if len(tols) > 0 {
		fmt.Fprintf(w, "tolerance: %s\n", strings.Join(tols, "; "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	pairings := map[string]bool{}
	for _, s := range r.Sets {
		pairings[s.Pairing] = true
	}
	fmt.Fprint(tw, "SET\tINPUTS\t")
	if len(pairings) > 1 {
		fmt.Fprint(tw, "RUNTIMES\t")
	}
	fmt.Fprintln(tw, "OUTPUT\tMAX ABS\tMAX REL\tULP\tMISMATCH\tWORST AT\tPOS\tFIRST POS\t")
	for _, s := range r.Sets {
		what := "given inputs"
		if s.Spec != nil {
			what = s.Spec.describe()
		}
		lead := fmt.Sprintf("%s\t%s\t", s.Name, what)
		if len(pairings) > 1 {
			lead += s.Pairing + "\t"
		}
		blank := strings.Repeat("\t", strings.Count(lead, "\t"))
		if s.Error != "" {
			fmt.Fprintf(tw, "%sERROR: %s\t\t\t\t\t\t\t\t\n", lead, s.Error)
			continue
		}
		for k, o := range s.Outputs {
			if k > 0 {
				lead = blank
			}
			if o.Problem != "" {
				fmt.Fprintf(tw, "%s%s\tDIFFERS: %s\t\t\t\t\t\t\t\n", lead, o.Name, o.Problem)
				continue
			}
			n := o.Compared
			worst, pos, first := "-", "-", "-"
			if o.Worst != nil && (o.MaxAbsErr > 0 || !o.Equal) {
				worst = fmt.Sprint(o.Worst.Index)
				if o.Worst.Position != nil {
					pos = fmt.Sprint(*o.Worst.Position)
				}
			}
			if o.FirstMismatch != nil && o.FirstMismatch.Position != nil {
				first = fmt.Sprint(*o.FirstMismatch.Position)
			}
			mark := ""
			if !o.Equal {
				mark = " !"
			}
			fmt.Fprintf(tw, "%s%s\t%.3g\t%.3g\t%d\t%d/%d%s\t%s\t%s\t%s\t\n", lead, o.Name, o.MaxAbsErr, o.MaxRelErr, o.MaxULP, o.Mismatches, n, mark, worst, pos, first)
		}
	}
	tw.Flush()
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Name, s.Reason)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	if d := r.Bisect; d != nil {
		fmt.Fprintf(w, "bisect: %s\n", d.Summary)
	}
	_, err := fmt.Fprintln(w, r.Summary)
	return err
}

// WriteJUnit writes the report as JUnit XML: one test suite, one test
// case per input set (and runtime pairing), failed when an output
// differs, in error when a model could not run the set; skipped sets are
// skipped test cases.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junit.Suite{Name: "onnxpe verify " + r.A + " vs " + r.B, Time: fmt.Sprintf("%.3f", r.Seconds)}
	multi := map[string]bool{}
	for _, s := range r.Sets {
		multi[s.Pairing] = true
	}
	for _, s := range r.Sets {
		c := junit.Case{Name: s.Name, Classname: "onnxpe.verify", Time: fmt.Sprintf("%.3f", s.Seconds)}
		if len(multi) > 1 {
			c.Name += " [" + s.Pairing + "]"
		}
		var out strings.Builder
		if s.Spec != nil {
			fmt.Fprintf(&out, "%s: %s\n", s.Spec.describe(), s.Spec.Purpose)
		}
		for _, o := range s.Outputs {
			fmt.Fprintf(&out, "%s: max abs %.3g, max rel %.3g, max ulp %d, %d mismatches\n", o.Name, o.MaxAbsErr, o.MaxRelErr, o.MaxULP, o.Mismatches)
		}
		c.SystemOut = out.String()
		switch {
		case s.Error != "":
			c.Error = &junit.Message{Message: s.Error, Type: "run"}
			suite.Errors++
		case !s.Equal:
			var msgs []string
			for _, o := range s.Outputs {
				if !o.Equal {
					msgs = append(msgs, "output "+o.Name+": "+describeMismatch(o))
				}
			}
			c.Failure = &junit.Message{Message: strings.Join(msgs, "; "), Type: "mismatch", Text: strings.Join(msgs, "\n")}
			suite.Fails++
		}
		suite.Cases = append(suite.Cases, c)
	}
	for _, s := range r.Skipped {
		suite.Cases = append(suite.Cases, junit.Case{Name: s.Name, Classname: "onnxpe.verify", Time: "0", Skipped: &junit.Message{Message: s.Reason}})
		suite.Skips++
	}
	suite.Tests = len(suite.Cases)
	return junit.Write(w, &junit.Suites{Name: "onnxpe verify", Tests: suite.Tests, Fails: suite.Fails, Errors: suite.Errors, Time: suite.Time, Suites: []junit.Suite{suite}})
}
