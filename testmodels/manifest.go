package testmodels

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
)

//go:embed manifest.json
var manifestJSON []byte

// Manifest is testmodels/manifest.json: every exported model with its
// ground truth in the audit report's vocabulary (see DESIGN.md).
type Manifest struct {
	About     string  `json:"about"`
	Generator any     `json:"generator"`
	Models    []Entry `json:"models"`
}

// Entry is one model of the corpus.
type Entry struct {
	Name      string   `json:"name"`
	Path      string   `json:"path"`      // relative to testmodels/
	TestData  string   `json:"test_data"` // relative to testmodels/
	Opset     int64    `json:"opset"`
	DType     string   `json:"dtype"`
	Reference string   `json:"reference"`
	Variant   string   `json:"variant"`
	NumLayers int      `json:"num_layers"`
	Inputs    []Input  `json:"inputs"`
	Outputs   []Output `json:"outputs"`
	Truth
	// ORTTruth is what an audit of ONNX Runtime's saves (ort_basic.onnx,
	// ort_extended.onnx) must report when it differs from the export's:
	// ONNX Runtime folds what the export computes from weights only (an
	// unrolled integration becomes a stored table). Nil: the same truth.
	ORTTruth *Truth `json:"ort_truth,omitempty"`
	SHA256   string `json:"sha256"`
}

// TruthOf is the truth of the entry's file: model.onnx, or one of ONNX
// Runtime's saves.
func (e *Entry) TruthOf(file string) Truth {
	if e.ORTTruth != nil && file != "model.onnx" {
		return *e.ORTTruth
	}
	return e.Truth
}

// Truth is what an audit of the model must report.
type Truth struct {
	Schemes  []string       `json:"schemes"`
	Layers   []LayerScheme  `json:"layers"`
	Findings []FindingTruth `json:"findings"`
}

// LayerScheme is the scheme one attention layer receives.
type LayerScheme struct {
	Index  int    `json:"index"`
	Scheme string `json:"scheme"`
}

// FindingTruth is one expected finding.
type FindingTruth struct {
	Scheme string         `json:"scheme"`
	Layers []int          `json:"layers"`
	Params map[string]any `json:"params"`
	Fused  bool           `json:"fused,omitempty"`
}

// Input describes a model input and the values that respect its meaning.
type Input struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"` // input_ids, position_ids, attention_mask, token_type_ids, pixel_values, past_key, past_value, ...
	DType     string    `json:"dtype"`
	Shape     []any     `json:"shape"`
	VocabSize int       `json:"vocab_size,omitempty"`
	Range     []float64 `json:"range,omitempty"`
	Meaning   string    `json:"meaning,omitempty"`
	// PaddingSide is "left", "right" or "none" for attention masks.
	PaddingSide string `json:"padding_side,omitempty"`
	// PadID is the token id of padding, for input_ids.
	PadID *int `json:"pad_id,omitempty"`
	// PatchSize is the patch size of pixel_values whose height and width
	// are open (a multiple of it).
	PatchSize int `json:"patch_size,omitempty"`
}

// Output describes a model output.
type Output struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []any  `json:"shape"`
}

// Load parses the embedded manifest.
func Load() (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		return nil, fmt.Errorf("testmodels: manifest.json: %w", err)
	}
	return &m, nil
}

// Dir is the absolute path of the testmodels folder in the source tree.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// RealModelsDir is the absolute path of the real models other people's
// tools made (passes/testdata/realmodels: each a folder with model.onnx,
// truth.json and its source).
func RealModelsDir() string {
	return filepath.Join(Dir(), "..", "passes", "testdata", "realmodels")
}

// RealModelCount is how many real models the repository carries.
const RealModelCount = 20

// RealModelFiles are the model.onnx files of the real models
// (RealModelsDir), in the order of their folders; an error when fewer
// than RealModelCount are there (a checkout without them).
func RealModelFiles() ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(RealModelsDir(), "*", "model.onnx"))
	if err == nil && len(paths) < RealModelCount {
		err = fmt.Errorf("testmodels: %d real models in %s, want %d", len(paths), RealModelsDir(), RealModelCount)
	}
	return paths, err
}

// HFModelsDir is the absolute path of the Hugging Face transformers
// exports (passes/testdata/hfmodels: each <name>/model.onnx with its truth
// in <name>.json and ONNX Runtime's inputs and outputs in _ortio/).
func HFModelsDir() string {
	return filepath.Join(Dir(), "..", "passes", "testdata", "hfmodels")
}

// ModelPath is the absolute path of an entry's model file.
func (e *Entry) ModelPath() string { return filepath.Join(Dir(), e.Path) }

// TestDataDir is the absolute path of an entry's reference test data.
func (e *Entry) TestDataDir() string { return filepath.Join(Dir(), e.TestData) }
