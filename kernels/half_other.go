//go:build !amd64 || purego

package kernels

import "github.com/x448/float16"

func widen16Vec(d []float32, s []float16.Float16) int { return 0 }

func narrow16Vec(d []float16.Float16, s []float32) int { return 0 }
