// Package junit writes JUnit XML, the test report format Jenkins, GitLab
// and GitHub's test reporters read: onnxpe verify's report (one case per
// input set) and onnxpe audit's policies (one case per model and
// policy). It writes; it does not read or decide what a case is.
package junit

import (
	"encoding/xml"
	"io"
)

// Suites is a JUnit document: <testsuites> with its totals.
type Suites struct {
	XMLName xml.Name `xml:"testsuites"`
	Name    string   `xml:"name,attr"`
	Tests   int      `xml:"tests,attr"`
	Fails   int      `xml:"failures,attr"`
	Errors  int      `xml:"errors,attr"`
	Time    string   `xml:"time,attr"`
	Suites  []Suite  `xml:"testsuite"`
}

// Suite is a <testsuite> with its totals and cases.
type Suite struct {
	Name   string `xml:"name,attr"`
	Tests  int    `xml:"tests,attr"`
	Fails  int    `xml:"failures,attr"`
	Errors int    `xml:"errors,attr"`
	Skips  int    `xml:"skipped,attr"`
	Time   string `xml:"time,attr"`
	Cases  []Case `xml:"testcase"`
}

// Case is a <testcase>: passed unless it has a Failure (the check failed),
// an Error (it could not be run) or is Skipped.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Message `xml:"failure,omitempty"`
	Error     *Message `xml:"error,omitempty"`
	Skipped   *Message `xml:"skipped,omitempty"`
	SystemOut string   `xml:"system-out,omitempty"`
}

// Message is a failure, error or skip: a one-line message, a type and
// the text.
type Message struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// Write writes doc as an indented XML document with its header.
func Write(w io.Writer, doc *Suites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
