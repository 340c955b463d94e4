#!/usr/bin/env bash
# Peak resident memory of `onnxpe convert --inline` and `--external-data`
# on a model of one 1 GiB external tensor (generated here, deleted
# afterwards): the tensors are streamed from the side file, never held
# whole. Goal: --inline under twice the tensor (it was four times).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
onnxpe=${ONNXPE:-$dir/onnxpe}
[[ -n "${ONNXPE:-}" ]] || go build -o "$onnxpe" ./cmd/onnxpe
go run ./bench/genlarge -tensor-gib 1 -o "$dir/big.onnx"
tensor=$(stat -c %s "$dir/big.onnx.data")
peak() { # command... : prints the peak RSS in KiB
  /usr/bin/time -v "$@" >/dev/null 2>"$dir/time.txt" || { cat "$dir/time.txt" >&2; exit 1; }
  awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt"
}
inline_kb=$(peak "$onnxpe" convert "$dir/big.onnx" -o "$dir/inline.onnx" --inline)
rm -f "$dir/big.onnx.data"
ext_kb=$(peak "$onnxpe" convert "$dir/inline.onnx" -o "$dir/ext.onnx" --external-data)
printf 'convert of a model with one tensor of %d bytes (%.2f GiB): --inline peak RSS %.1f MB (%.2fx the tensor); --external-data of the inlined model %.1f MB (%.2fx)\n' \
  "$tensor" "$(echo "$tensor / 1073741824" | bc -l)" \
  "$(echo "$inline_kb / 1024" | bc -l)" "$(echo "$inline_kb * 1024 / $tensor" | bc -l)" \
  "$(echo "$ext_kb / 1024" | bc -l)" "$(echo "$ext_kb * 1024 / $tensor" | bc -l)"
if (( inline_kb * 1024 > 2 * tensor )); then
  echo "FAIL: --inline peaked over twice the tensor" >&2
  exit 1
fi
