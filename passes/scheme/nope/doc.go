// Package nope is NoPE: attention blocks that receive no position
// information. The audit gives it to the blocks no finding of another
// scheme reaches; detect.go finds Llama 4's temperature tuning of q by the
// position, its one parameter.
package nope
