// Package absolute is what the absolute schemes (sinusoidal and learned)
// share: the position-dependent values added to the token embeddings,
// found once (the absolute pass: Encoding, with its rows at probe
// positions, the stored table it reads and the sinusoid the rows lie on),
// the rewrite of a table read at consecutive positions, the extension of
// a stored table, the code generator and the plots. The schemes'
// packages claim the encodings of their kind.
package absolute
