//go:build !linux

package kernels

import "errors"

const canSpill = false

func spillBytes([]byte) ([]byte, error) { return nil, errors.New("no memory mapping here") }

func spillFile(int) ([]byte, error) { return nil, errors.New("no memory mapping here") }

func releaseSpilled([]byte) {}

func unmapSpilled([]byte) {}
