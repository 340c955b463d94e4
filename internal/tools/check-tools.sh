#!/bin/sh
# check-tools.sh: what `make test` needs. Prints nothing when everything is
# there, else one line naming the first missing tool and how to install it.
# Environment: GO (the go command), ORT_LIB and ORT_VER (ONNX Runtime's
# library; npm is needed only while it is not installed).
GO=${GO:-go}
min=26
v=$($GO env GOVERSION 2>/dev/null) || { echo "make test needs Go 1.$min or newer: install it from https://go.dev/dl/"; exit 0; }
minor=$(echo "$v" | sed -E 's/^go1\.([0-9]+).*/\1/')
case "$minor" in '' | *[!0-9]*) minor=0 ;; esac
if [ "$minor" -lt "$min" ]; then
  echo "make test needs Go 1.$min or newer (found $v): install it from https://go.dev/dl/"
  exit 0
fi
cc=$($GO env CC)
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "make test needs a C compiler ($cc) for the race detector and the ONNX Runtime tests: install gcc (Debian: apt-get install gcc)"
  exit 0
fi
if [ ! -f "$ORT_LIB" ] && ! command -v npm >/dev/null 2>&1; then
  echo "make test needs npm to install ONNX Runtime (onnxruntime-node@$ORT_VER): install Node.js and npm (Debian: apt-get install npm)"
  exit 0
fi
if ! command -v protoc >/dev/null 2>&1; then
  echo "make test needs protoc to check the generated ONNX bindings: install protobuf-compiler (Debian: apt-get install protobuf-compiler)"
  exit 0
fi
