package emit

import (
	"fmt"
	"strings"
)

func LayerList(ls []int) string {
	var s []string
	for _, l := range ls {
		s = append(s, fmt.Sprint(l))
	}
	return strings.Join(s, ", ")
}
