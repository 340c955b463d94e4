#!/usr/bin/env bash
# Wall time and peak resident memory of onnxpe's commands on Llama-shaped
# models of billions of parameters (issue 24), next to ONNX Runtime loading
# and running the same model.
#
#   bash bench/large.sh [SIZE...]        SIZE: 0.32b 1.17b 1.64b 3b 7b (default: all)
#
# Each model is built by bench/bigllama (testmodels.Llama: RoPE computed in
# the graph, causal mask, grouped-query attention, random weights written to
# a side file as they are made), then timed under /usr/bin/time -v:
#   audit, inspect, run (128 tokens, --json: load and compute apart),
#   ONNX Runtime load + run of the same 128 tokens (bench/ortrun),
#   rewrite A -o B (its own verify included), verify A A, verify A B,
#   extend A --to 8192 (4x: yarn from 2048; 16384 too for 1.64b), codegen.
# Figures go to $OUT (default bench/large.md) as a Markdown table, one row
# per command: wall time, peak RSS, and RSS over the weights' size.
#
# COMMANDS="rewrite verify ..." times only those of: audit inspect run ort
# rewrite verify extend codegen (default all; verify needs rewrite for A B).
#
# BEFORE=path/to/onnxpe also times an older onnxpe binary on the same
# commands right before this one (same model, same run), under an address
# space limit of $BEFORE_LIMIT_KB (default 17 GB: it holds several copies of
# the weights and would take the machine's memory).
#
# Disk: a model, its rewrite and its extension side by side: three times
# the weights of the largest size asked for (1.64b: 19.7 GB; 3b float32,
# 2.97B parameters: 35.7 GB; 7b float16, 6.74B parameters: 40.4 GB), in
# $BENCH_DIR (default a new folder under /tmp), removed after each model
# and on exit. Time: hours on 2 cores (extend of 1.64b to 16384 positions
# alone about two; COMMANDS leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(0.32b 1.17b 1.64b 3b 7b)
out=${OUT:-$root/bench/large.md}
work=$(mktemp -d "${BENCH_DIR:-/tmp}/onnxpe-large.XXXXXX")
trap 'rm -rf "$work"' EXIT

make -s ort >/dev/null
ort_lib=$root/.cache/ort/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1
go build -o "$work/onnxpe" ./cmd/onnxpe
go build -o "$work/bigllama" ./bench/bigllama
CGO_ENABLED=1 go build -tags ort -o "$work/ortrun" ./bench/ortrun

# shape SIZE prints bigllama's flags for SIZE.
shape() {
  case $1 in
  0.32b) echo "-layers 4 -hidden 2048 -heads 16 -kv-heads 8 -ffn 5632 -vocab 32000 -dtype float32" ;;
  1.17b) echo "-layers 22 -hidden 2048 -heads 16 -kv-heads 8 -ffn 5632 -vocab 32000 -dtype float32" ;;
  1.64b) echo "-layers 32 -hidden 2048 -heads 16 -kv-heads 8 -ffn 5632 -vocab 32000 -dtype float32" ;;
  3b) echo "-layers 28 -hidden 3072 -heads 24 -kv-heads 8 -ffn 8192 -vocab 32000 -dtype float32" ;;
  7b) echo "-layers 32 -hidden 4096 -heads 32 -kv-heads 32 -ffn 11008 -vocab 32000 -dtype float16" ;;
  *) echo "bench/large.sh: unknown size $1 (0.32b 1.17b 1.64b 3b 7b)" >&2; exit 2 ;;
  esac
}

{
  echo "| model | weights | binary | command | exit | wall (s) | peak RSS (GB) | RSS / weights | notes |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >"$out"

# timed LABEL BINARYNAME NOTE -- CMD... runs CMD under /usr/bin/time -v
# and appends a row.
timed() {
  local label=$1 bin=$2 note=$3
  shift 4
  local tf=$work/time.txt
  local rc=0
  if [ "$bin" = before ]; then
    (ulimit -v "${BEFORE_LIMIT_KB:-17000000}"; /usr/bin/time -v "$@" >"$work/out.txt" 2>"$tf") || rc=$?
  else
    /usr/bin/time -v "$@" >"$work/out.txt" 2>"$tf" || rc=$?
  fi
  local rss_kb wall
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tf" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  local extra=$note
  if [ "$rc" != 0 ]; then
    extra="$note $(grep -v '^\s' "$tf" | grep -m1 -i 'out of memory\|error\|onnxpe:' | cut -c1-120 || true)"
  fi
  if [ "$bin" = ort ] || [ "${label#run}" != "$label" ]; then
    extra="$extra $(tr -d '\n ' <"$work/out.txt" | grep -o '"load_seconds":[0-9.]*\|"compute_seconds":[0-9.]*' | sed 's/"//g; s/_seconds:/ /; s/$/ s/' | tr '\n' ' ' || true)"
  fi
  awk -v size="$size" -v w="$weights" -v bin="$bin" -v label="$label" -v rc="$rc" -v wall="$wall" -v rss="$rss_kb" -v extra="$extra" \
    'BEGIN { printf "| %s | %.2f GB | %s | %s | %s | %.1f | %.2f | %.2f | %s |\n", size, w / 1e9, bin, label, rc, wall, rss * 1024 / 1e9, rss * 1024 / w, extra }' | tee -a "$out"
}

# want CMD says whether COMMANDS asks for CMD.
want() { [ -z "${COMMANDS:-}" ] || [[ " $COMMANDS " == *" $1 "* ]]; }

for size in "${sizes[@]}"; do
  dir=$work/$size
  mkdir -p "$dir"
  # shellcheck disable=SC2046
  "$work/bigllama" -o "$dir/a.onnx" $(shape "$size") -inputs 128 >/dev/null
  weights=$(stat -c %s "$dir/a.onnx.data")
  a=$dir/a.onnx
  bins=(new)
  [ -n "${BEFORE:-}" ] && bins=(before new)
  for bin in "${bins[@]}"; do
    exe=$work/onnxpe
    [ "$bin" = before ] && exe=$BEFORE
    rm -rf "$dir/b.onnx" "$dir/b.onnx.data" "$dir/c.onnx" "$dir/c.onnx.data" "$dir/codegen"
    want audit && timed "audit" "$bin" "" -- "$exe" audit "$a" --json
    want inspect && timed "inspect" "$bin" "" -- "$exe" inspect "$a"
    want run && timed "run, 128 tokens" "$bin" "" -- "$exe" run "$a" --inputs "$a.inputs" --json
    want rewrite && timed "rewrite A -o B" "$bin" "" -- "$exe" rewrite "$a" -o "$dir/b.onnx"
    want verify && timed "verify A A" "$bin" "" -- "$exe" verify "$a" "$a"
    if want verify && [ -f "$dir/b.onnx" ]; then
      timed "verify A rewrite(A)" "$bin" "" -- "$exe" verify "$a" "$dir/b.onnx"
    fi
    want extend && timed "extend --to 8192 (yarn from 2048)" "$bin" "" -- "$exe" extend "$a" -o "$dir/c.onnx" --to 8192 --method yarn --original-max-positions 2048
    rm -f "$dir/c.onnx" "$dir/c.onnx.data"
    if want extend && [ "$size" = 1.64b ]; then
      timed "extend --to 16384 (yarn from 2048)" "$bin" "" -- "$exe" extend "$a" -o "$dir/c.onnx" --to 16384 --method yarn --original-max-positions 2048
      rm -f "$dir/c.onnx" "$dir/c.onnx.data"
    fi
    want codegen && timed "codegen --lang go" "$bin" "" -- "$exe" codegen "$a" --lang go --package llama -o "$dir/codegen"
  done
  want ort && timed "ONNX Runtime load + run, 128 tokens" "ort" "" -- env ONNXPE_ORT_LIB="$ort_lib" "$work/ortrun" --inputs "$a.inputs" "$a"
  rm -rf "$dir"
done
echo "wrote $out" >&2
