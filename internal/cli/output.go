package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// The rules of every file a command writes (README "outputs"): a command
// writes to a new path or replaces a regular file it is meant to replace;
// anything else in the way (a device, a FIFO, a socket, a folder) is
// refused before any work. checkWritable is where that is decided; the
// checks below add what each kind of output needs.

// checkWritable checks that path may be written: it does not exist, or it
// is a regular file (a symlink is followed: a link to a device is a
// device). What it refuses is a one-line input error naming flag.
func checkWritable(flag, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return badInput("%s %s: %v", flag, path, pathErr(err))
	case fi.Mode().IsRegular():
		return nil
	}
	return badInput("%s %s is %s, not a regular file: onnxpe writes only new files or replaces regular ones", flag, path, fileKind(fi))
}

// fileKind names what a non-regular file is.
func fileKind(fi fs.FileInfo) string { return graph.FileKind(fi) }

// checkOutputFile checks, before a command does any work, that it can
// write the file out: out is new or a regular file, its folder exists and
// takes new files, and out is none of the files the command reads (reads:
// models, their side files, inputs). What it finds is a one-line input
// error.
func checkOutputFile(flag, out string, reads ...string) error {
	if out == "" {
		return badInput("%s: give a file name", flag)
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return badInput("%s %s is a folder, not a file", flag, out)
	}
	if err := checkWritable(flag, out); err != nil {
		return err
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
		return badInput("%s %s is %s, not a folder", flag, dir, fileKindOrFile(fi))
	case err == nil:
		return checkFolder(flag, dir, dir)
	}
	return checkFolder(flag, dir, filepath.Dir(filepath.Clean(dir)))
}

func fileKindOrFile(fi fs.FileInfo) string {
	if fi.Mode().IsRegular() {
		return "a file"
	}
	return fileKind(fi)
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

// overwriteSideFilesFlag is the flag of convert, rewrite and extend that
// lets a side file replace a file that is not the output's own.
const overwriteSideFilesFlag = "overwrite-side-files"

const overwriteSideFilesUsage = "let a side file (external data) replace an existing file that is not a side file of the model OUT replaces"

// sideFilesHelp is what the help of a command that saves models says
// about side files.
const sideFilesHelp = `Side files (external data) are written beside OUT. An existing file of
the same name is replaced only when it is a side file of the model OUT
replaces (its own previous weights); any other file is refused (exit 2)
unless --` + overwriteSideFilesFlag + ` is given.`

// checkSideFiles checks the side files that saving a model to out writes
// (graph.Model.SaveSideFiles): each is new or a regular file, none is a
// file the command reads, and an existing one is a side file of the model
// now at out (what out's previous save wrote) unless overwrite is set.
func checkSideFiles(out string, sides []string, overwrite bool, reads ...string) error {
	var own []string
	ownRead := false
	for _, s := range sides {
		if err := checkWritable("side file", s); err != nil {
			return err
		}
		if err := checkNotRead("side file", s, reads...); err != nil {
			return err
		}
		if _, err := os.Stat(s); err != nil || overwrite {
			continue
		}
		if !ownRead {
			own, ownRead = ownSideFiles(out), true
		}
		if slices.ContainsFunc(own, func(o string) bool { return sameFile(o, s) }) {
			continue
		}
		return badInput("side file %s already exists and is not a side file of %s: it would be replaced (write to another folder, or pass --%s to replace it)", s, out, overwriteSideFilesFlag)
	}
	return nil
}

// ownSideFiles lists the side files of the model at out, if out holds
// one (weights need not be there).
func ownSideFiles(out string) []string {
	if fi, err := os.Stat(out); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	m, err := graph.LoadWith(out, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		return nil
	}
	return m.SideFiles()
}

// checkModelSave checks the side files of saving m to out with so.
func checkModelSave(m *graph.Model, out string, so graph.SaveOptions, overwrite bool, reads ...string) error {
	sides, err := m.SaveSideFiles(out, so)
	if err != nil {
		return badInput("%s: %v", out, err)
	}
	return checkSideFiles(out, sides, overwrite, reads...)
}

// checkTestDataOutputs checks the files `run --outputs dir` writes
// (output_0.pb ... output_{n-1}.pb): each is new or a regular file, none
// is a file the command reads, and dir holds no input_N.pb: the outputs
// of a test-data folder are its reference outputs, which run never
// replaces.
func checkTestDataOutputs(flag, dir string, n int, reads ...string) error {
	if ins, _ := filepath.Glob(filepath.Join(dir, "input_*.pb")); len(ins) > 0 {
		return badInput("%s %s is a test-data folder (it holds %s): its output_N.pb files are reference outputs; write to another folder", flag, dir, filepath.Base(ins[0]))
	}
	for i := range n {
		p := filepath.Join(dir, outputFileName(i))
		if err := checkWritable(flag, p); err != nil {
			return err
		}
		if err := checkNotRead(flag, p, reads...); err != nil {
			return err
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
