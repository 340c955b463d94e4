#!/usr/bin/env bash
# Peak resident memory of `onnxpe inspect` on a model with over 2 GiB of
# external weights (generated here, deleted afterwards). Goal: under 100 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/onnxpe" ./cmd/onnxpe
go run ./bench/genlarge -o "$dir/large.onnx"
weights=$(stat -c %s "$dir/large.onnx.data")
/usr/bin/time -v "$dir/onnxpe" inspect "$dir/large.onnx" >"$dir/out.txt" 2>"$dir/time.txt"
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
printf 'inspect of a model with %d bytes (%.2f GiB) of external weights: peak RSS %.1f MB, wall %s\n' \
  "$weights" "$(echo "$weights / 1073741824" | bc -l)" "$(echo "$rss_kb / 1024" | bc -l)" "$wall"
if (( rss_kb > 100 * 1024 )); then
  echo "FAIL: peak RSS over 100 MB" >&2
  exit 1
fi
