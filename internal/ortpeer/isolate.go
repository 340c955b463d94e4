//go:build ort

package ortpeer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/onnxpe/onnxpe/graph"
)

// ONNX Runtime runs in this process: a model that crashes it while
// loading (MPT's Hugging Face export makes ONNX Runtime 1.30 fault) would
// take the process down with a signal trace. LoadsInChild opens the model
// in a child process first, this executable started with envLoadProbe
// naming the model: its init opens a session and exits before main runs.

const envLoadProbe = "ONNXPE_ORT_LOAD_PROBE"

// probeRefused is the child's exit code when ONNX Runtime refuses the
// model with an error (0: it loads it). A crash inside ONNX Runtime ends
// the child otherwise: Go's runtime turns the signal into exit code 2
// and a trace on stderr, or the signal kills it.
const probeRefused = 7

func init() {
	path := os.Getenv(envLoadProbe)
	if path == "" {
		return
	}
	threads, _ := strconv.Atoi(os.Getenv(envLoadProbe + "_THREADS"))
	code := probeRefused // a load error: the parent's session reports it
	if m, err := graph.Load(path); err == nil {
		if s, err := NewSession(path, m, Options{Threads: threads, Level: os.Getenv(envLoadProbe + "_LEVEL")}); err == nil {
			s.Close()
			code = 0
		}
	}
	os.Exit(code)
}

// LoadsInChild opens the model at path in ONNX Runtime in a child
// process, as NewSession with opts would, and says so when ONNX Runtime crashes there (the child dies
// by a signal). Other failures of the child (the library missing, a model
// ONNX Runtime refuses) are left to the session the caller opens, which
// reports them as errors.
func LoadsInChild(path string, opts Options) error {
	// A file already tried (same size and time) is not tried again.
	st, err := os.Stat(path)
	if err != nil {
		return nil // the caller's session says what is wrong with it
	}
	key := fmt.Sprintf("%s|%d|%d|%d|%s", path, st.Size(), st.ModTime().UnixNano(), opts.Threads, opts.Level)
	probed.Lock()
	defer probed.Unlock()
	if err, ok := probed.m[key]; ok {
		return err
	}
	err = loadsInChild(path, opts)
	probed.m[key] = err
	return err
}

var probed = struct {
	sync.Mutex
	m map[string]error
}{m: map[string]error{}}

func loadsInChild(path string, opts Options) error {
	exe, err := os.Executable()
	if err != nil {
		return nil // nothing to start: the caller's session runs as before
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envLoadProbe+"="+path, fmt.Sprintf("%s_THREADS=%d", envLoadProbe, opts.Threads), envLoadProbe+"_LEVEL="+opts.Level)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == probeRefused {
		return nil
	}
	what := "a crash"
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		what = ws.Signal().String()
	} else if line, _, _ := strings.Cut(stderr.String(), "\n"); strings.HasPrefix(line, "SIG") {
		what, _, _ = strings.Cut(line, ":") // SIGSEGV: segmentation violation
	}
	return fmt.Errorf("ortpeer: ONNX Runtime crashes (%s) creating a session of %s: it cannot run this model", what, path)
}
