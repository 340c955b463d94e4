package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// auditFile is one model the audit reads, found from its arguments.
type auditFile struct {
	path string
	// given says the file was named on the command line (not found in a
	// folder or by a pattern).
	given bool
	// err, when set, is why the file or folder cannot be read: it is
	// reported as that entry's error, and nothing is audited.
	err error
}

// expandModels turns the audit's arguments into model files, in the
// order of the arguments: a file is taken as it is (whatever its name); a
// folder gives every *.onnx file below it, recursively, in lexical order
// (hidden files and folders, whose names start with a dot, are left out,
// and so is every other file: external data, test data, side files); a
// pattern (with *, ? or [...], quoted so that the shell leaves it alone;
// ** matches any number of folders) gives the files it matches, and the
// *.onnx files below the folders it matches. A file found twice is
// audited once. many says whether the arguments name more than one file,
// a folder or a pattern (the report is then a list, whatever it holds).
//
// An argument that names nothing (no such file, a pattern matching no
// file, a folder holding no *.onnx file) is a usage error: nothing is
// audited. A folder below one given that cannot be read is an entry with
// its error.
func expandModels(args []string) (files []auditFile, many bool, err error) {
	seen := map[string]bool{}
	add := func(f auditFile) {
		key := filepath.Clean(f.path)
		if !seen[key] {
			seen[key] = true
			files = append(files, f)
		}
	}
	many = len(args) > 1
	for _, a := range args {
		fi, statErr := os.Stat(a)
		switch {
		case statErr == nil && fi.IsDir():
			many = true
			found := modelsUnder(a)
			if len(found) == 0 {
				return nil, false, badInput("audit: the folder %s holds no .onnx file", a)
			}
			for _, f := range found {
				add(f)
			}
		case statErr != nil && hasGlobMeta(a):
			many = true
			found, err := globModels(a)
			if err != nil {
				return nil, false, err
			}
			for _, f := range found {
				add(f)
			}
		default:
			// A file, or a path that does not exist: loading it says
			// what is wrong, as for every command.
			add(auditFile{path: a, given: true})
		}
	}
	return files, many, nil
}

// modelsUnder lists the *.onnx files below dir, in lexical order; a
// folder that cannot be read is an entry with its error.
func modelsUnder(dir string) []auditFile {
	var out []auditFile
	// With a separator at its end, a root that is a link to a folder is
	// walked too (WalkDir does not follow links; the paths below it are
	// joined and cleaned all the same).
	root := strings.TrimSuffix(dir, string(filepath.Separator)) + string(filepath.Separator)
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, auditFile{path: filepath.Clean(p), err: badInput("%s: cannot read the folder: %v", filepath.Clean(p), pathErr(err))})
			return nil
		}
		if p == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() && isModelName(d.Name()) && isFile(p) {
			out = append(out, auditFile{path: p})
		}
		return nil
	})
	return out
}

// isModelName says whether a file in a folder is taken for a model.
func isModelName(name string) bool { return strings.EqualFold(filepath.Ext(name), ".onnx") }

// isFile says whether p is a regular file or a link to one.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// globModels lists what pattern matches: the files, and the *.onnx files
// below the folders, in lexical order. A segment ** matches any number of
// folders (none included); * and ? do not match a leading dot.
func globModels(pattern string) ([]auditFile, error) {
	sep := string(filepath.Separator)
	segs := strings.Split(filepath.Clean(pattern), sep)
	for _, s := range segs {
		if _, err := filepath.Match(s, ""); err != nil {
			return nil, badInput("audit: %s: %v", pattern, err)
		}
	}
	i := 0
	for i < len(segs) && !hasGlobMeta(segs[i]) {
		i++
	}
	root, rest := strings.Join(segs[:i], sep), segs[i:]
	switch {
	case root == "" && filepath.IsAbs(pattern):
		root = sep
	case root == "":
		root = "."
	}
	deep := false
	for _, s := range rest {
		deep = deep || s == "**"
	}
	var out []auditFile
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil // a pattern says nothing of folders it cannot read
		}
		r, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		rel := strings.Split(r, sep)
		if matchSegments(rest, rel) {
			switch {
			case isDir(p):
				out = append(out, modelsUnder(p)...)
				if d.IsDir() {
					return fs.SkipDir
				}
			case isFile(p):
				out = append(out, auditFile{path: p})
			}
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || !deep && len(rel) >= len(rest)) {
			return fs.SkipDir
		}
		return nil
	})
	if len(out) == 0 {
		return nil, badInput("audit: %s matches no file", pattern)
	}
	return out, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// matchSegments matches path segments against pattern segments, ** taking
// any number of segments; a wildcard does not match a leading dot.
func matchSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for k := 0; k <= len(name); k++ {
			if k > 0 && strings.HasPrefix(name[k-1], ".") {
				return false
			}
			if matchSegments(pat[1:], name[k:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	if strings.HasPrefix(name[0], ".") && !strings.HasPrefix(pat[0], ".") {
		return false
	}
	ok, _ := filepath.Match(pat[0], name[0])
	return ok && matchSegments(pat[1:], name[1:])
}
