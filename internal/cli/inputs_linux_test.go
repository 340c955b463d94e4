//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO or a device given as a model or as test data is refused at once
// with one line (B7: it hung, or read /dev/zero without bound).
func TestInputsThatAreNotRegularFiles(t *testing.T) {
	b := newBadInputs(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.onnx")
	npz := filepath.Join(dir, "feeds.npz")
	data := filepath.Join(dir, "test_data_set_0")
	os.Mkdir(data, 0o755)
	// b.data's files, input_0.pb a FIFO.
	es, _ := os.ReadDir(b.data)
	for _, e := range es {
		if e.Name() != "input_0.pb" {
			os.WriteFile(filepath.Join(data, e.Name()), mustRead(t, filepath.Join(b.data, e.Name())), 0o644)
		}
	}
	for _, p := range []string{fifo, npz, filepath.Join(data, "input_0.pb")} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", fifo}, "is a FIFO"},
		{[]string{"inspect", "/dev/zero"}, "is a character device"},
		{[]string{"audit", fifo}, "is a FIFO"},
		{[]string{"run", b.good, "--inputs", npz}, "is a FIFO"},
		{[]string{"run", b.good, "--inputs", data}, "is a FIFO"},
		{[]string{"verify", b.good, "--against", data}, "is a FIFO"},
	} {
		done := make(chan struct{})
		var code int
		var e string
		go func() {
			code, _, e = runCLI(t, c.args...)
			close(done)
		}()
		select {
		case <-done:
			oneLineExit2(t, c.args, code, e, c.want)
		case <-time.After(20 * time.Second):
			t.Fatalf("%v still runs after 20 s", c.args)
		}
	}
}
