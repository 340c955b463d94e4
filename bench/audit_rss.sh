#!/usr/bin/env bash
# Peak resident memory and time of `onnxpe audit` on a model with over
# 2 GiB of external weights (generated here, deleted afterwards): the audit
# reads only the tensors the detectors need (frequencies, tables), never
# the projection weights. Goal: under 150 MB. Then the same for many models (below).
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

# Many models: zoos of 16 and 32 copies (hard links) of a model with about
# 76 MB of inline weights, audited 2 at a time. What is kept of a model
# once audited is its report, so the peak does not follow the number of
# models: it levels off at what the 2 models being audited take, with the
# garbage collector's headroom (GOGC=100 lets the heap reach twice what was
# live at the last collection). Goal: 32 models under 1.25x 16 models.
go run ./bench/genlarge -zoo -o "$dir/zoo.onnx"
zoo_peak() { # N -> peak RSS in kB of the audit of a folder of N copies
  local n=$1 z="$dir/zoo$1"
  mkdir -p "$z"
  for i in $(seq 1 "$n"); do ln -f "$dir/zoo.onnx" "$z/m$i.onnx"; done
  /usr/bin/time -v "$dir/onnxpe" audit "$z" --jobs 2 --json >"$dir/zoo.json" 2>"$dir/time.txt"
  if [ "$(grep -c '"findings"' "$dir/zoo.json")" != "$n" ] || grep -q '"error"' "$dir/zoo.json"; then
    echo "FAIL: the audit of $n models did not report $n models" >&2; exit 1
  fi
  awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt"
}
sixteen=$(zoo_peak 16)
thirtytwo=$(zoo_peak 32)
size=$(stat -c %s "$dir/zoo.onnx")
printf 'audit --jobs 2 of models of %.1f MB each: 16 models peak RSS %.1f MB, 32 models %.1f MB (%.2fx)\n' \
  "$(echo "$size / 1048576" | bc -l)" "$(echo "$sixteen / 1024" | bc -l)" "$(echo "$thirtytwo / 1024" | bc -l)" "$(echo "$thirtytwo / $sixteen" | bc -l)"
if (( thirtytwo * 4 > sixteen * 5 )); then
  echo "FAIL: the peak of 32 models is over 1.25x that of 16: memory grows with the models audited" >&2
  exit 1
fi
