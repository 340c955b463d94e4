#!/usr/bin/env bash
# Peak resident memory and time of `onnxpe audit` on a model with over
# 2 GiB of external weights (generated here, deleted afterwards): the audit
# reads only the tensors the detectors need (frequencies, tables), never
# the projection weights. Goal: under 150 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/onnxpe" ./cmd/onnxpe
go run ./bench/genlarge -o "$dir/large.onnx"
weights=$(stat -c %s "$dir/large.onnx.data")
/usr/bin/time -v "$dir/onnxpe" audit "$dir/large.onnx" --json >"$dir/out.json" 2>"$dir/time.txt"
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
user=$(awk -F': ' '/User time/ {print $2}' "$dir/time.txt")
grep -q '"rope"' "$dir/out.json" || { echo "FAIL: the audit did not find the model's RoPE" >&2; cat "$dir/out.json" >&2; exit 1; }
printf 'audit of a model with %d bytes (%.2f GiB) of external weights: peak RSS %.1f MB, wall %s, user %s s\n' \
  "$weights" "$(echo "$weights / 1073741824" | bc -l)" "$(echo "$rss_kb / 1024" | bc -l)" "$wall" "$user"
if (( rss_kb > 150 * 1024 )); then
  echo "FAIL: peak RSS over 150 MB" >&2
  exit 1
fi
