#!/usr/bin/env bash
# anchor.sh — what one trace costs ragwatch next to what it costs a bare OpenTelemetry Collector
# (the OTLP receiver and the nop exporter, nothing else: scripts/otelcol, pinned versions), on
# the same traffic, one after the other in this invocation: `ragwatch loadgen` sends COUNT
# five-span OpenInference RAG traces (5 x 1 KB documents, a fresh trace id each) over OTLP gRPC (or HTTP: PROTOCOL),
# 20 traces a request, 4 in flight, as fast as each accepts. For each it prints CPU per trace
# (user + system of all threads, /proc/<pid>/stat, over the load and until the process is idle
# again), peak RSS (VmHWM), and ragwatch's over the Collector's. ragwatch runs twice: with
# `sampling.rate: 0` and on its defaults (10 % sampled, builtin scorer in process); each run
# checks that every trace sent became one assembled record and that every sampled record was
# scored (none dropped or left waiting: a ratio without their CPU would flatter the build).
# With LOGS=1 loadgen also sends, before each request of traces, the GenAI log events of the
# same traces as an OpenAI-instrumented app emits them (`loadgen --logs`: a system message, a
# user message and a choice per trace, on the trace's LLM span) to the OTLP logs service of
# both; the Collector takes them in a logs pipeline otlp → nop, and ragwatch must join every
# user message and choice to its span (none orphaned, late or dropped). CPU per trace is then
# the cost of a trace and its events.
# Linux only (/proc).
#
# Environment (all optional):
#   RW        ragwatch binary to measure (default: built from this checkout)
#   LG        ragwatch binary whose loadgen sends (default: RW); keep it fixed across builds
#   OTELCOL   Collector binary (default: built from scripts/otelcol)
#   COUNT     traces per run (default 100000)
#   CONFIGS   which ragwatch runs: "rate0 defaults" (default), or one of them
#   PROTOCOL  how loadgen sends to both: grpc (default), http (OTLP/HTTP protobuf), http-json
#             (OTLP/HTTP JSON)
#   LOGS      0 (default): traces only; 1: each trace's GenAI log events too; "0 1": both in
#             each round, the Collector run again for each (the ratios of one mode divide by
#             the Collector's of the same mode)
#   ROUNDS    run the Collector and then each ragwatch config this many times, alternating, and
#             print the median of each figure and of the per-round ratios (default 1)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the project's toolchain; machines start on an older Go with GOTOOLCHAIN=local

here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
cpid=""
cleanup() {
	if [[ -n "$cpid" ]] && kill -0 "$cpid" 2>/dev/null; then
		kill -TERM "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

GO=${GO:-go}
COUNT=${COUNT:-100000}
CONFIGS=${CONFIGS:-"rate0 defaults"}
RW=${RW:-}
if [[ -z "$RW" ]]; then
	RW=$tmp/ragwatch
	(cd "$here" && CGO_ENABLED=0 $GO build -trimpath -tags "grpcnotrace timetzdata" -ldflags "-s -w" -o "$RW" ./cmd/ragwatch)
fi
LG=${LG:-$RW}
OTELCOL=${OTELCOL:-}
if [[ -z "$OTELCOL" ]]; then
	OTELCOL=$tmp/otelcol
	(cd "$here/scripts/otelcol" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$OTELCOL" .)
fi
LOADGEN_ARGS="--rate 0 --count $COUNT --spans 5 --documents 5 --doc-bytes 1024 --batch 20 --concurrency 4"
LOGS=${LOGS:-0}
for mode in $LOGS; do
	[[ "$mode" == 0 || "$mode" == 1 ]] || { echo "unknown LOGS $mode (0, 1 or \"0 1\")" >&2; exit 2; }
done
# lg_args MODE: the loadgen flags of a mode.
lg_args() { if [[ "$1" == 1 ]]; then echo "$LOADGEN_ARGS --logs"; else echo "$LOADGEN_ARGS"; fi; }
# tag MODE: how the figures of a mode are named.
tag() { if [[ "$1" == 1 ]]; then echo "+logs"; fi; }
tck=$(getconf CLK_TCK)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 1 50); do
	port=$((15000 + RANDOM % 15000)) # below the kernel's ephemeral ports (32768 on), which the
	# senders' own connections take: a listener cannot bind one of those while it is in use
	port_free $port && port_free $((port + 1)) && break
done

echo "# $(uptime)"
hport=$((port + 1))
PROTOCOL=${PROTOCOL:-grpc}
case $PROTOCOL in
grpc) send_to=127.0.0.1:$port ;;
http | http-json) send_to=127.0.0.1:$hport ;;
*)
	echo "unknown PROTOCOL $PROTOCOL (grpc, http, http-json)" >&2
	exit 2
	;;
esac
export PROTOCOL
echo "# $(getconf _NPROCESSORS_ONLN) cpus; loadgen --protocol $PROTOCOL $LOADGEN_ARGS (LOGS=$LOGS: --logs in mode 1)"

# The Collector: OTLP in, nop out, for traces and for logs, its own telemetry off.
cat >"$tmp/otelcol.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$port
      http:
        endpoint: 127.0.0.1:$hport
exporters:
  nop:
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [nop]
    logs:
      receivers: [otlp]
      exporters: [nop]
YAML
collector() {
	local mode=$1
	echo "== otelcol$(tag "$mode")"
	"$OTELCOL" --config "$tmp/otelcol.yaml" >"$tmp/otelcol.log" 2>&1 &
	cpid=$!
	for _ in $(seq 1 300); do
		port_free $port || break
		kill -0 "$cpid" 2>/dev/null || { echo "otelcol exited:"; cat "$tmp/otelcol.log"; exit 1; }
		sleep 0.1
	done
	port_free $port && { echo "otelcol not listening after 30s:"; cat "$tmp/otelcol.log"; exit 1; }
	ticks() { awk '{ print $14 + $15 }' "/proc/$cpid/stat"; }
	c0=$(ticks)
	"$LG" loadgen --protocol "$PROTOCOL" --endpoint "$send_to" $(lg_args "$mode") | tee "$tmp/lg.out"
	# Until idle: the Collector has nothing queued, but count its tail the same way as ragwatch's.
	for _ in $(seq 1 10); do
		a=$(ticks)
		sleep 1
		(($(ticks) - a < tck / 20)) && break
	done
	c1=$(ticks)
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$cpid/status")
	kill -TERM "$cpid"
	wait "$cpid" 2>/dev/null || true
	cpid=""
	sent=$(awk -F'traces=' 'NF > 1 { split($2, a, " "); print a[1]; exit }' "$tmp/lg.out")
	if [[ -z "$sent" || "$sent" == 0 ]]; then
		echo "loadgen sent nothing to otelcol:"
		cat "$tmp/otelcol.log"
		exit 1
	fi
	col_us=$(awk -v c="$((c1 - c0))" -v t="$tck" -v n="$sent" 'BEGIN { printf "%.1f", c / t * 1e6 / n }')
	col_mib=$((hwm / 1024))
	echo "otelcol$(tag "$mode"): sent=$sent cpu_us_per_trace=$col_us vmhwm_mib=$col_mib"
	echo "$col_us" >>"$tmp/col_us$mode"
	echo "$col_mib" >>"$tmp/col_mib$mode"
}

ragwatch_run() {
	local cfg=$1 mode=$2 lrec="" joined="" unread=""
	case $cfg in
	rate0) extra=$'sampling:\n  rate: 0' ;;
	defaults) extra="" ;;
	*)
		echo "unknown config $cfg (rate0, defaults)" >&2
		exit 2
		;;
	esac
	echo "== ragwatch, $cfg$(tag "$mode")"
	RW="$RW" LG="$LG" LOADGEN_ARGS="$(lg_args "$mode")" CONFIG_EXTRA="$extra" SETTLE=${SETTLE:-30s} \
		"$here/scripts/ingest.sh" | tee "$tmp/rw.out"
	line=$(grep '^summary:' "$tmp/rw.out")
	field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $line"; }
	rw_us=$(field cpu_us_per_trace) rw_mib=$(field vmhwm_mib) assembled=$(field assembled) rsent=$(field sent)
	lost=ok
	if [[ "$assembled" != "$rsent" ]]; then
		lost="MISMATCH"
		status=1
	fi
	# A sample dropped or left unscored is CPU not spent: the ratio would flatter the build.
	counts=$(grep -m1 ' scorer_calls=' "$tmp/rw.out")
	count() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $counts"; }
	sampled=$(count sampled) sdropped=$(count scoring_dropped) scored=$(count scorer_calls)
	if [[ -z "$sampled" || "$sdropped" != 0 || "${scored:-0}" -lt "$sampled" ]]; then
		lost="$lost; UNSCORED: sampled=$sampled scored=$scored dropped=$sdropped"
		status=1
	fi
	if [[ "$mode" == 1 ]]; then
		# Every user message and choice joined to its span, the system messages counted as
		# unread, nothing orphaned, late or dropped: else the events' CPU is not all in.
		lrec=$(awk -F'log_records=' 'NF > 1 { split($2, a, " "); print a[1]; exit }' "$tmp/rw.out")
		outcomes=$(grep -m1 '^ragwatch: log_records_received=' "$tmp/rw.out")
		outcome() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $outcomes"; }
		joined=$(outcome joined) unread=$(outcome unread)
		if [[ -z "$lrec" || "$lrec" == 0 || "$(outcome log_records_received)" != "$lrec" ||
			$((${joined:-0} + ${unread:-0})) != "$lrec" || "${joined:-0}" == 0 ]]; then
			lost="$lost; EVENTS NOT ALL JOINED: sent=$lrec ${outcomes#ragwatch: }"
			status=1
		fi
	fi
	ratio=$(awk -v a="$rw_us" -v b="$col_us" 'BEGIN { printf "%.2f", a / b }')
	echo "anchor $cfg$(tag "$mode"): ragwatch ${rw_us}us/trace ${rw_mib}MiB, otelcol ${col_us}us/trace ${col_mib}MiB," \
		"cpu ratio ${ratio}x; assembled=$assembled sent=$rsent${counts:+ sampled=$sampled queue_messages=$(count queue_messages)}${joined:+ log_records=$lrec joined=$joined unread=$unread} ($lost)"
	echo "$rw_us" >>"$tmp/$cfg$mode.us"
	echo "$rw_mib" >>"$tmp/$cfg$mode.mib"
	echo "$ratio" >>"$tmp/$cfg$mode.ratio"
}

ROUNDS=${ROUNDS:-1}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
status=0
for round in $(seq 1 "$ROUNDS"); do
	if ((ROUNDS > 1)); then
		echo "== round $round of $ROUNDS"
	fi
	for mode in $LOGS; do
		collector "$mode"
		for cfg in $CONFIGS; do
			ragwatch_run "$cfg" "$mode"
		done
	done
done
if ((ROUNDS > 1)); then
	echo "== medians of $ROUNDS rounds"
	for mode in $LOGS; do
		echo "otelcol$(tag "$mode"): cpu_us_per_trace $(median <"$tmp/col_us$mode") vmhwm_mib $(median <"$tmp/col_mib$mode")"
		for cfg in $CONFIGS; do
			echo "anchor $cfg$(tag "$mode") median: ragwatch $(median <"$tmp/$cfg$mode.us")us/trace $(median <"$tmp/$cfg$mode.mib")MiB," \
				"cpu ratio $(median <"$tmp/$cfg$mode.ratio")x (per round: $(paste -sd' ' "$tmp/$cfg$mode.ratio"))"
		done
	done
fi
echo "# $(uptime)"
exit $status
