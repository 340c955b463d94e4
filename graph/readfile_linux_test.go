//go:build linux

package graph

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a device or a folder given as a model is refused at once (B7:
// a FIFO hung Load, /dev/zero was read without bound).
func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{fifo: "is a FIFO", "/dev/zero": "is a character device", dir: "is a directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), kind) {
				t.Errorf("Load(%s): %v, want %q and ErrNotRegular", path, err, kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still runs after 10 s", path)
		}
		if _, err := ReadTensorFile(path); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadTensorFile(%s): %v", path, err)
		}
	}
}

// A file is read up to the limit and no further.
func TestReadRegularFileIsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(p, make([]byte, 1000), 0o644)
	if b, err := ReadRegularFile(p, 1000); err != nil || len(b) != 1000 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := ReadRegularFile(p, 999); err == nil || !strings.Contains(err.Error(), "over the limit of 999 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
}
