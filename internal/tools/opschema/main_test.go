package main

import (
	"strings"
	"testing"
)

const sample = `## Version 1 of the default ONNX operator set
### <a name="GlobalLpPool-1"></a>**GlobalLpPool-1**</a>

#### Attributes

<dl>
<dt><tt>p</tt> : float (default is 2.0)</dt>
<dd>p value</dd>
</dl>

#### Inputs

<dl>
<dt><tt>X</tt> : T</dt>
</dl>

## Version 2 of the default ONNX operator set
### <a name="GlobalLpPool-2"></a>**GlobalLpPool-2**</a>

#### Attributes

<dl>
<dt><tt>p</tt> : int (default is 2)</dt>
<dt><tt>axes</tt> : list of ints</dt>
</dl>

## Version 1 of the 'ai.onnx.ml' operator set
### <a name="ai.onnx.ml.Binarizer-1"></a>**ai.onnx.ml.Binarizer-1**</a>

#### Attributes

<dl>
<dt><tt>threshold</tt> : float (default is 0.0)</dt>
</dl>
`

// The changelog's versions, domains and attribute types are read; inputs
// are not attributes.
func TestRead(t *testing.T) {
	ops := map[string]map[int]map[string]string{}
	if err := read(strings.NewReader(sample), ops); err != nil {
		t.Fatal(err)
	}
	g := ops["\x00GlobalLpPool"]
	if g[1]["p"] != "AttrFloat" || g[2]["p"] != "AttrInt" || g[2]["axes"] != "AttrInts" || len(g[1]) != 1 {
		t.Errorf("GlobalLpPool: %v", g)
	}
	if b := ops["ai.onnx.ml\x00Binarizer"]; b[1]["threshold"] != "AttrFloat" {
		t.Errorf("Binarizer: %v", ops)
	}
	if err := read(strings.NewReader(strings.Replace(sample, ": int (", ": rational (", 1)), ops); err == nil {
		t.Error("an unknown attribute type was read")
	}
}
