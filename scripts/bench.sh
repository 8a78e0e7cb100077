#!/usr/bin/env bash
# bench.sh — what `make bench` runs: the Go benchmarks (time, CPU time and allocations per
# operation), then a short loadgen run against a freshly started ragwatch (scripts/ingest.sh),
# printing the figures docs/performance.md explains. Linux (the ingest part reads /proc).
#
# Environment (all optional):
#   BENCH       benchmark regexp (default .)
#   BENCHTIME   go test -benchtime (default 1s)
#   LOAD        loadgen duration (default 15s); 0 skips the ingest run
#   ANCHOR      1 (default) runs scripts/anchor.sh after it: ragwatch against a bare OpenTelemetry
#               Collector on the same traffic (COUNT traces, default 100000); 0 skips it
#   plus everything scripts/ingest.sh reads (LOADGEN_ARGS, CONFIG_EXTRA, ...)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the project's toolchain; machines start on an older Go with GOTOOLCHAIN=local
cd "$(dirname "$0")/.."

BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}
LOAD=${LOAD:-15s}
GO=${GO:-go}

echo "== machine"
uptime
echo "cpus: $(getconf _NPROCESSORS_ONLN)  $($GO version)"

echo "== Go benchmarks (-benchtime $BENCHTIME; cpu-ns/op = process CPU time per op, GC included)"
pkgs=$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
# shellcheck disable=SC2086
$GO test -run '^$' -bench "$BENCH" -benchmem -benchtime "$BENCHTIME" $pkgs

if [[ "$LOAD" != 0 ]]; then
	echo "== ingest: OTLP gRPC -> assembly -> signals, 5-span traces with 5 x 1 KB documents, batches of 50"
	LOADGEN_ARGS=${LOADGEN_ARGS:-"--rate 0 --duration $LOAD --spans 5 --documents 5 --doc-bytes 1024 --batch 50 --concurrency 4"} \
		scripts/ingest.sh
	echo "cpu_per_trace: ragwatch CPU (user + system, from /proc/<pid>/stat) / records;" \
		"1e6 / cpu_per_trace is traces per second per core. loadgen runs on the same machine."
fi
if [[ "${ANCHOR:-1}" != 0 ]]; then
	echo "== anchor: CPU per trace and peak RSS against a bare OpenTelemetry Collector (OTLP in, nop out)"
	GO="$GO" scripts/anchor.sh
fi
echo "== $(uptime)"
