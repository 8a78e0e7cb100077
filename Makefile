# ragwatch — build, test and benchmark. `make test` is the one command the README and CI use.

GO       ?= go
# The toolchain every build and test uses. Machines start on an older Go with GOTOOLCHAIN=local
# (which ignores go.mod's toolchain line), so it is exported here; the module proxy serves it.
export GOTOOLCHAIN := go1.27.3
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
# grpcnotrace keeps golang.org/x/net/trace (and with it html/template, whose reflective method
# calls switch off the linker's dead-code elimination) out of the binary: 87 MB -> 55 MB, and
# ≈ 14 MiB less resident memory (docs/performance.md).
# timetzdata embeds the time zone database: the image is FROM scratch (deploy/docker/Dockerfile).
TAGS     ?= grpcnotrace timetzdata
FUZZTIME ?= 5s
BENCH    ?= .

.PHONY: build run demo test vet lint unit e2e e2e-deps attack fuzz bench fmt fmt-check clean

## build: static binary in bin/ragwatch
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o bin/ragwatch ./cmd/ragwatch

## run: ragwatch on its embedded defaults (no config file); Ctrl-C stops it
run:
	$(GO) run -tags "$(TAGS)" ./cmd/ragwatch run

## demo: ragwatch plus a synthetic RAG app that degrades and recovers, with a live view
demo:
	$(GO) run -tags "$(TAGS)" ./cmd/ragwatch demo

## test: everything CI runs — vet, staticcheck, the unit and integration tests with the race
## detector, the end-to-end suite
test: vet lint unit e2e

vet:
	$(GO) vet ./...

## lint: staticcheck, built from the module proxy at a pinned version
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...

unit:
	$(GO) test -race ./...
	# Timing ratios mean nothing under the race detector: the tests that check how cost grows
	# with input run again without it (they skip under -race).
	$(GO) test -count=1 -run 'StaysLinear' ./internal/redact/

## e2e: the end-to-end suite against real Prometheus and Alertmanager (see e2e/doc.go)
e2e: e2e-deps
	$(GO) test -race -timeout 30m -tags e2e ./e2e/...

## attack: the slow attack-and-fault scenarios (header and idle-connection floods, a full store
## volume, log floods; docs/security.md). Each is a `TestAttack*` test behind the `attack` build
## tag, beside the code it attacks. Budget: 10 minutes on a 2-core machine; CI runs it after
## `make test`. A scenario the machine cannot stage (no tmpfs mount, no cgroup) skips and says why.
ATTACK_TIMEOUT ?= 15m
attack:
	$(GO) test -tags attack -run '^TestAttack' -count=1 -timeout $(ATTACK_TIMEOUT) ./...

## e2e-deps: install Prometheus and Alertmanager (Debian packages) when they are missing
e2e-deps:
	scripts/e2e-deps.sh

## fuzz: run every fuzz target for FUZZTIME each (CI uses a short time); see scripts/fuzz.sh.
## Among them FuzzDecodeProtoMatchesPdata (collector/otlp): the assembler's protobuf decoder
## against pdata's decoding, the receivers' limits and assemble.FromTraces
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## bench: the Go benchmarks with allocations and CPU per op, a short loadgen run against a fresh
## ragwatch, then scripts/anchor.sh: CPU per trace and peak RSS next to a bare OpenTelemetry
## Collector's, same traffic, same run (scripts/bench.sh; BENCH=Regexp to narrow, BENCHTIME=,
## LOAD=0 skips the loadgen run, ANCHOR=0 the anchor, COUNT= its traces)
bench:
	GO='$(GO)' BENCH='$(BENCH)' scripts/bench.sh

## fmt: format the Go sources
fmt:
	gofmt -w $$(git ls-files '*.go')

## fmt-check: fail when a Go file is not gofmt-clean
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-clean:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin
