package cli

import (
	"io/fs"
	"os"
	"path/filepath"
)

// checkOutputFile checks, before a command does any work, that it can
// write the file out: out is not a folder, its folder exists and takes new
// files, and out is none of the files the command reads (reads: models,
// their side files, inputs). What it finds is a one-line input error.
func checkOutputFile(flag, out string, reads ...string) error {
	if out == "" {
		return badInput("%s: give a file name", flag)
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return badInput("%s %s is a folder, not a file", flag, out)
	}
	if err := checkFolder(flag, out, filepath.Dir(out)); err != nil {
		return err
	}
	return checkNotRead(flag, out, reads...)
}

// checkOutputFolder checks, before a command does any work, that it can
// create or fill the folder dir: dir is a folder or does not exist, and
// its parent folder exists and takes new files.
func checkOutputFolder(flag, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return badInput("%s %s is a file, not a folder", flag, dir)
	case err == nil:
		return checkFolder(flag, dir, dir)
	}
	return checkFolder(flag, dir, filepath.Dir(filepath.Clean(dir)))
}

// checkFolder checks that folder exists and that a file can be created in
// it (creating and removing an empty temporary file: permissions alone do
// not say it, as for root or on a read-only file system).
func checkFolder(flag, out, folder string) error {
	fi, err := os.Stat(folder)
	if err != nil || !fi.IsDir() {
		return badInput("%s %s: the folder %s does not exist", flag, out, folder)
	}
	f, err := os.CreateTemp(folder, ".onnxpe-probe-*")
	if err != nil {
		return badInput("%s %s: cannot write in the folder %s: %v", flag, out, folder, pathErr(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// checkNotRead refuses to write out over a file the command reads.
func checkNotRead(flag, out string, reads ...string) error {
	for _, r := range reads {
		if sameFile(r, out) {
			if r == out {
				return badInput("%s %s is an input of the command: write to another file", flag, out)
			}
			return badInput("%s %s is %s, an input of the command: write to another file", flag, out, r)
		}
	}
	return nil
}

// filesUnder lists path, a file, or the files below path, a folder.
func filesUnder(path string) []string {
	if path == "" {
		return nil
	}
	var files []string
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// sameFile reports whether two paths name the same existing file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
