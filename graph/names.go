package graph

import (
	"fmt"
	"unicode/utf8"
)

// maxNameInMessage is the longest name printed whole in a message.
const maxNameInMessage = 96

// ShortName returns s for a message: a name of at most 96 bytes as it is,
// a longer one (a model may hold a 1 MB node name) as its first 64 and
// last 16 bytes around "…" and its length, cut at rune boundaries.
func ShortName(s string) string {
	if len(s) <= maxNameInMessage {
		return s
	}
	head, tail := 64, len(s)-16
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s…(%d bytes)…%s", s[:head], len(s), s[tail:])
}
