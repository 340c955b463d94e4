# onnxpe: audit, rewrite and verify the positional encodings of ONNX models.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

GO        ?= go
BIN       := bin/onnxpe
ORT_VER   := 1.30.0
ORT_DIR   := $(CURDIR)/.cache/ort
ORT_LIB   := $(ORT_DIR)/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1
DEMO_MODEL := testmodels/models/rope_llama/model.onnx
DEMO_MODELS := testmodels/models
FUZZTIME  ?= 10s

.PHONY: all build check-tools test test-quick test-go test-race test-ort fuzz demo bench proto lint ort testmodels conformance-data clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/onnxpe

## test: the whole suite (lint, unit and conformance tests, fuzzing, ONNX Runtime differential tests)
test: check-tools lint test-go test-race fuzz test-ort

## check-tools: what make test needs (Go 1.26+, a C compiler, npm until ONNX Runtime is installed, protoc),
## checked before anything runs: a missing tool stops make with one line saying what to install
ifneq ($(filter test check-tools,$(MAKECMDGOALS)),)
TOOLS_MISSING := $(shell GO='$(GO)' ORT_LIB='$(ORT_LIB)' ORT_VER='$(ORT_VER)' sh internal/tools/check-tools.sh)
ifneq ($(TOOLS_MISSING),)
$(error $(TOOLS_MISSING))
endif
endif
check-tools:
	@echo "make test has what it needs: $$($(GO) env GOVERSION), $$($(GO) env CC), $$(command -v npm || echo 'ONNX Runtime already in .cache/ort'), $$(protoc --version)"

test-go:
	$(GO) test -json -count=1 ./... | $(GO) run ./internal/tools/testsummary

## test-quick: every package's fast tests (go test -short: the slowest tests skip, with the reason,
## or run a subset), for the inner loop while changing code; make test runs everything
test-quick:
	$(GO) test -short -json -count=1 ./... | $(GO) run ./internal/tools/testsummary

## test-race: the executor, graph and CLI under the race detector (kernels/gemm's own suite takes minutes under it and is left out;
## so is TestExtendRoPEAtRealLengths, which test-go runs: its seven extensions to 8192 positions took 706 s under the detector,
## past go test's 10-minute limit on the CI machine, and they run the same goroutines as the shorter extend tests that stay)
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m -skip '^TestExtendRoPEAtRealLengths$$' ./kernels ./testmodels ./graph ./internal/cli

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./graph
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeTensor$$' -fuzztime 5s ./graph
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeValue$$' -fuzztime 5s ./graph
	$(GO) test -run '^$$' -fuzz '^FuzzReadNPZ$$' -fuzztime 5s ./kernels
	$(GO) test -run '^$$' -fuzz '^FuzzRun$$' -fuzztime 20s ./kernels
	$(GO) test -run '^$$' -fuzz '^FuzzAudit$$' -fuzztime 20s -fuzzminimizetime 10x ./passes/audit

## test-ort: tests that run ONNX Runtime beside the Go executor (build tag ort, cgo)
test-ort: ort
	CGO_ENABLED=1 ONNXPE_ORT_LIB=$(ORT_LIB) $(GO) test -json -count=1 -tags ort -run 'ORT|Differential' ./kernels ./testmodels ./internal/ortpeer ./verify ./internal/cli | $(GO) run ./internal/tools/testsummary

## ort: install ONNX Runtime's CPU library from the npm package into .cache/ort
ort: $(ORT_LIB)
$(ORT_LIB):
	mkdir -p $(ORT_DIR)
	cd $(ORT_DIR) && npm install --silent --no-audit --no-fund --ignore-scripts onnxruntime-node@$(ORT_VER)
	test -f $(ORT_LIB)

DEMO_HTML := bin/demo-audit.html
DEMO_REWRITTEN := bin/demo-rewritten.onnx
DEMO_EXTENDED := bin/demo-extended.onnx
DEMO_CODEGEN := bin/demo-codegen

## demo: the audit of the bundled model (a table, and an HTML report with plots) and of the folder of bundled models (its summary),
## then inspect, run and verify the model; rewrite it and verify the rewrite; extend it; generate its code
demo: build
	./$(BIN) audit $(DEMO_MODEL)
	@echo
	./$(BIN) audit $(DEMO_MODELS) --summary
	@echo
	./$(BIN) audit $(DEMO_MODEL) --format html -o $(DEMO_HTML)
	@echo "the HTML report of the audit, with plots: $(CURDIR)/$(DEMO_HTML)"
	@echo
	./$(BIN) inspect $(DEMO_MODEL)
	@echo
	./$(BIN) run $(DEMO_MODEL) --inputs $(dir $(DEMO_MODEL))test_data_set_0
	@echo
	./$(BIN) verify $(DEMO_MODEL) $(dir $(DEMO_MODEL))ort_extended.onnx
	@echo
	./$(BIN) rewrite $(DEMO_MODEL) -o $(DEMO_REWRITTEN)
	@echo
	./$(BIN) verify $(DEMO_MODEL) $(DEMO_REWRITTEN)
	@echo
	./$(BIN) extend $(DEMO_MODEL) -o $(DEMO_EXTENDED) --to 1024 --method yarn --original-max-positions 256
	@echo
	rm -rf $(DEMO_CODEGEN)
	./$(BIN) codegen $(DEMO_MODEL) --lang go --package ropellama --module example.com/ropellama -o $(DEMO_CODEGEN)
	cd $(DEMO_CODEGEN) && $(GO) test

## bench: Go benchmarks, the memory checks of inspect, audit and convert, onnxpe vs ONNX Runtime, rewritten vs original models, a realistic-width Llama against its rewrite and its --attention fused rewrite in ONNX Runtime, models of billions of parameters (bench/large.sh: hours, and 41 GB of disk under /tmp; figures for BENCHMARKS.md)
bench: ort
	$(GO) test -run '^$$' -bench . -benchmem ./...
	bash bench/inspect_rss.sh
	bash bench/audit_rss.sh
	bash bench/convert_rss.sh
	CGO_ENABLED=1 ONNXPE_ORT_LIB=$(ORT_LIB) $(GO) run -tags ort ./bench/vsort
	CGO_ENABLED=1 ONNXPE_ORT_LIB=$(ORT_LIB) $(GO) run -tags ort ./bench/rewrite
	CGO_ENABLED=1 ONNXPE_ORT_LIB=$(ORT_LIB) $(GO) run -tags ort ./bench/attention
	bash bench/large.sh

proto:
	protoc --plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) --go_out=. --go_opt=paths=source_relative internal/onnxpb/onnx.proto

lint:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## testmodels: re-export the PyTorch corpus (needs Debian's python3-torch and python3-onnx)
testmodels: ort
	/usr/bin/python3 testmodels/export/export.py
	NODE_PATH=$(ORT_DIR)/node_modules node testmodels/export/ort_optimize.js
	NODE_PATH=$(ORT_DIR)/node_modules node testmodels/export/ort_check.js

## conformance-data: refresh testdata/conformance from the shared folder beside the checkout, when it is there
## (the only place that looks at ../shared; CONFORMANCE_SRC=DIR names another copy)
CONFORMANCE_SRC ?= ../shared/conformance
CONFORMANCE_SETS := onnx-node onnx-simple onnx-backend ort-rotary
conformance-data:
	@src=$(CONFORMANCE_SRC); dst=testdata/conformance; \
	if [ ! -d $$src ]; then echo "conformance-data: no $$src beside the repository; $$dst left as it is"; exit 0; fi; \
	for s in $(CONFORMANCE_SETS); do \
	  rm -rf $$dst/.$$s.new && cp -r $$src/$$s $$dst/.$$s.new && chmod -R u+w $$dst/.$$s.new && \
	  rm -rf $$dst/$$s && mv $$dst/.$$s.new $$dst/$$s; \
	done; \
	echo "conformance-data: $(CONFORMANCE_SETS) copied from $$src; now run go test ./kernels -run TestConformance and review git status"

clean:
	rm -rf bin .cache
