//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nodes makes a character device (root only: mknod; the null device's
// numbers, as /dev/null), a FIFO and a socket-like non-regular set in dir,
// and returns them by kind. Without root the device is left out, and the
// test says so.
func nodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	ns := map[string]string{}
	if os.Geteuid() == 0 {
		p := filepath.Join(dir, "mynull")
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatalf("mknod: %v", err)
		}
		ns["a character device"] = p
	} else {
		t.Logf("skipped: the character-device cases need root (mknod); CI runs as root")
	}
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	ns["a FIFO (named pipe)"] = p
	return ns
}

// Every output is refused when a device or a FIFO is in its place (B1):
// exit 2, one line naming what it is, and the node is still there, not a
// regular file.
func TestOutputOntoDeviceOrFIFOIsRefused(t *testing.T) {
	b := newBadInputs(t)
	devs := t.TempDir()
	g := b.good
	for kind, p := range nodes(t, devs) {
		cases := [][]string{
			{"audit", g, "-o", p},
			{"convert", g, "-o", p},
			{"convert", g, "-o", p, "--external-data"},
			{"rewrite", g, "-o", p},
			{"extend", g, "-o", p, "--to", "128", "--method", "linear", "--original-max-positions", "32"},
			{"verify", g, g, "--junit", p},
			{"codegen", g, "--lang", "go", "--package", "pe", "-o", p},
			// The side file of --external-data: OUT.data, and --location.
			{"convert", g, "-o", filepath.Join(devs, "x.onnx"), "--external-data", "--location", filepath.Base(p)},
		}
		// run --outputs DIR: the node as DIR, and as DIR/output_0.pb.
		runDir := filepath.Join(t.TempDir(), "outs")
		os.Mkdir(runDir, 0o755)
		if err := os.Symlink(p, filepath.Join(runDir, "output_0.pb")); err != nil {
			t.Fatal(err)
		}
		cases = append(cases,
			[]string{"run", g, "--inputs", b.data, "--outputs", p},
			[]string{"run", g, "--inputs", b.data, "--outputs", runDir})
		for _, args := range cases {
			code, _, e := runCLI(t, args...)
			oneLineExit2(t, args, code, e, kind)
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().IsRegular() {
				t.Fatalf("%v: %s is now %v (%v)", args, p, fi.Mode(), err)
			}
			if _, err := os.Stat(filepath.Join(devs, "x.onnx")); err == nil {
				t.Fatalf("%v wrote a model beside a refused side file", args)
			}
		}
	}
}
