//go:build !linux

package graph

import (
	"errors"
	"os"
)

const canMap = false

func keyOf(os.FileInfo) (fileKey, bool) { return fileKey{}, false }

func mmapFile(*os.File, int64) ([]byte, error) { return nil, errors.New("no memory mapping here") }

type advice int

const (
	adviseDontNeed advice = iota
	advisePopulate
)

func adviseMapped([]byte, advice) {}
