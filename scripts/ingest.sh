#!/usr/bin/env bash
# ingest.sh — start a fresh ragwatch on free ports with a temporary store, send it synthetic OTLP
# traces with `ragwatch loadgen`, and report what the ragwatch process spent: CPU per trace (from
# /proc/<pid>/stat, user + system, all threads, GC included), peak and final RSS
# (/proc/<pid>/status VmRSS), records assembled, drops, evictions. Linux only (/proc).
#
# Environment (all optional):
#   RW            ragwatch binary (default: built into a temp dir from this checkout)
#   LOADGEN_ARGS  loadgen flags (default: as fast as possible, 5 spans, 5 x 1 KB docs, batch 50)
#   PROTOCOL      how loadgen sends: grpc (default), http (OTLP/HTTP protobuf), http-json (OTLP/HTTP JSON)
#   CONFIG_EXTRA  YAML appended to the generated config (e.g. sampling/scoring sections)
#   WARMUP        send the same traffic for this long first, unmeasured (e.g. 10s)
#   SETTLE        how long to wait for held traces to come out after the load (default 10s)
#   RSS_EVERY     print VmRSS every N seconds during the load (default 0: only peak/final)
#   RW_ENV        environment for the ragwatch process only (e.g. "GOGC=200 GODEBUG=gctrace=1")
#   LOG_COPY      copy ragwatch's log here when done
#   PERF_DATA     record a `perf record -g` CPU profile of ragwatch during the load to this file
#   CPU_PROFILE   save a Go CPU profile of ragwatch (/debug/pprof/profile) over the first
#                 CPU_SECONDS (default 15) of the load to this file (read with `go tool pprof`;
#                 needs curl)
#   HEAP_PROFILE  save ragwatch's heap profile (/debug/pprof/heap, after a GC) to this file the
#                 moment the load ends, before held traces drain (read with `go tool pprof`)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the project's toolchain; machines start on an older Go with GOTOOLCHAIN=local

here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=""
cleanup() {
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	[[ -n "${LOG_COPY:-}" && -f "$tmp/ragwatch.log" ]] && cp "$tmp/ragwatch.log" "$LOG_COPY"
	rm -rf "$tmp"
}
trap cleanup EXIT

RW=${RW:-}
if [[ -z "$RW" ]]; then
	RW=$tmp/ragwatch
	(cd "$here" && CGO_ENABLED=0 ${GO:-go} build -trimpath -tags grpcnotrace -ldflags "-s -w -X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o "$RW" ./cmd/ragwatch)
fi
LOADGEN_ARGS=${LOADGEN_ARGS:-"--rate 0 --duration 20s --spans 5 --documents 5 --doc-bytes 1024 --batch 50 --concurrency 4"}
SETTLE=${SETTLE:-10s}
RSS_EVERY=${RSS_EVERY:-0}

# Free ports: ask the kernel for each by binding port 0 is not possible from bash, so pick a
# random base and check nothing listens there.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 1 50); do
	base=$((15000 + RANDOM % 15000)) # below the kernel's ephemeral ports (32768 on), which the
	# senders' own connections take: a listener cannot bind one of those while it is in use
	if port_free $base && port_free $((base + 1)) && port_free $((base + 2)) && port_free $((base + 3)); then
		break
	fi
done
grpc=127.0.0.1:$base http=127.0.0.1:$((base + 1)) api=127.0.0.1:$((base + 2)) natsep=127.0.0.1:$((base + 3))
PROTOCOL=${PROTOCOL:-grpc}
case $PROTOCOL in
grpc) send_to=$grpc ;;
http | http-json) send_to=$http ;;
*)
	echo "unknown PROTOCOL $PROTOCOL (grpc, http, http-json)" >&2
	exit 2
	;;
esac

cat >"$tmp/ragwatch.yaml" <<YAML
receivers:
  otlp:
    grpc: { endpoint: "$grpc" }
    http: { endpoint: "$http" }
http:
  endpoint: "$api"
  api_endpoint: ""
nats:
  store_dir: "$tmp/store"
  embedded: { endpoint: "$natsep" }
log:
  level: warn
${CONFIG_EXTRA:-}
YAML

# get URL: the body of a 200 answer (curl, else wget, else bash's /dev/tcp), else a failure.
get() {
	if command -v curl >/dev/null; then
		curl -fsS --max-time 5 "$1" 2>/dev/null
	elif command -v wget >/dev/null; then
		wget -qO- -T 5 "$1" 2>/dev/null
	else
		local hp=${1#http://} status
		local host=${hp%%/*} path=/${hp#*/}
		exec 3<>"/dev/tcp/${host%:*}/${host##*:}" || return 1
		printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$host" >&3
		read -r _ status _ <&3
		[[ "$status" == 200 ]] && sed '1,/^\r$/d' <&3
		exec 3<&-
		[[ "$status" == 200 ]]
	fi
}
# metric NAME: the sum of every series of NAME on /metrics.
metric() { get "http://$api/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.0f", s }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
# anon_kib: the resident memory that is the process's own (heap, stacks), without the mapped
# binary's file pages that VmRSS also counts.
anon_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status"; }
tck=$(getconf CLK_TCK)

env ${RW_ENV:-} "$RW" run -c "$tmp/ragwatch.yaml" >"$tmp/ragwatch.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
	get "http://$api/readyz" >/dev/null && break
	kill -0 "$pid" 2>/dev/null || { echo "ragwatch exited:"; cat "$tmp/ragwatch.log"; exit 1; }
	sleep 0.1
done
get "http://$api/readyz" >/dev/null || { echo "ragwatch not ready after 30s:"; cat "$tmp/ragwatch.log"; exit 1; }

echo "# $(uptime)"
echo "# ragwatch $("$RW" version 2>/dev/null | head -1) pid $pid, loadgen $LOADGEN_ARGS"
[[ -n "${CONFIG_EXTRA:-}" ]] && echo "# config extra: $(echo "$CONFIG_EXTRA" | tr '\n' ' ')"

# settle waits for the held traces to be assembled (assembly.wait after the last span), the
# record count to stop moving and the process to go idle (sampled records scored in process),
# at most SETTLE.
settle() {
	local deadline=$(($(date +%s) + ${SETTLE%s})) last=-1 now c0 c1
	while (($(date +%s) < deadline)); do
		now=$(metric ragwatch_records_total)
		c0=$(cpu_ticks)
		sleep 1
		c1=$(cpu_ticks)
		[[ $(metric ragwatch_assembly_traces_held) == 0 && "$now" == "$last" ]] && ((c1 - c0 < tck / 20)) && break
		last=$now
	done
}

if [[ -n "${WARMUP:-}" ]]; then
	# Same traffic (other trace ids: another seed), not measured: the heap, caches and buffers
	# reach their working size first.
	"${LG:-$RW}" loadgen --protocol "$PROTOCOL" --endpoint "$send_to" $LOADGEN_ARGS --duration "$WARMUP" --seed 7919 | sed 's/^/warmup: /' || true
	settle
fi
rss_idle=$(rss_kib)
anon_start=$(anon_kib)
cpu0=$(cpu_ticks)
rec0=$(metric ragwatch_records_total)
peak=$rss_idle
(
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		r=$(rss_kib) an=$(anon_kib)
		echo "$r" >>"$tmp/rss"
		echo "$an" >>"$tmp/anon"
		if [[ "$RSS_EVERY" != 0 ]] && ((i % RSS_EVERY == 0)); then
			echo "rss t=${i}s $((r / 1024)) MiB anon $((an / 1024)) MiB held_traces=$(metric ragwatch_assembly_traces_held) held_bytes=$(metric ragwatch_assembly_held_bytes) evicted=$(metric ragwatch_traces_evicted_total)"
		fi
		i=$((i + 1))
		sleep 1
	done
) &
sampler=$!

if [[ -n "${PERF_DATA:-}" ]]; then
	perf record -q -F 499 -g -o "$PERF_DATA" -p "$pid" 2>/dev/null &
	perfpid=$!
fi
if [[ -n "${CPU_PROFILE:-}" ]]; then
	curl -fsS --max-time $((${CPU_SECONDS:-15} + 10)) "http://$api/debug/pprof/profile?seconds=${CPU_SECONDS:-15}" >"$CPU_PROFILE" &
	profpid=$!
fi
"${LG:-$RW}" loadgen --protocol "$PROTOCOL" --endpoint "$send_to" $LOADGEN_ARGS | tee "$tmp/loadgen.out" || true
cpu_load=$(cpu_ticks)
if [[ -n "${perfpid:-}" ]]; then
	kill -INT "$perfpid" 2>/dev/null || true
	wait "$perfpid" 2>/dev/null || true
fi
[[ -n "${profpid:-}" ]] && { wait "$profpid" || echo "could not fetch the CPU profile"; }
if [[ -n "${HEAP_PROFILE:-}" ]]; then
	get "http://$api/debug/pprof/heap?gc=1" >"$HEAP_PROFILE" || echo "could not fetch the heap profile"
fi
sent=$(awk -F'traces=' 'NF > 1 { split($2, a, " "); print a[1]; exit }' "$tmp/loadgen.out")
# Traces of requests in flight when a --duration run ended: taken by ragwatch or not.
cut=$(awk -F' cut=' 'NF > 1 { split($2, a, " "); print a[1]; exit }' "$tmp/loadgen.out")

settle
cpu1=$(cpu_ticks)
rec1=$(metric ragwatch_records_total)
rss_end=$(rss_kib)
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
[[ -s "$tmp/rss" ]] && peak=$(sort -n "$tmp/rss" | tail -1)
anon_peak=0
[[ -s "$tmp/anon" ]] && anon_peak=$(sort -n "$tmp/anon" | tail -1)

records=$((rec1 - rec0))
cpu_ms=$(((cpu1 - cpu0) * 1000 / tck))
echo "ragwatch: records=$records (loadgen sent ${sent:-?}${cut:+, and $cut cut by the end of the run}) cpu=${cpu_ms}ms (during load $(((cpu_load - cpu0) * 1000 / tck))ms)" \
	"cpu_per_trace=$(awk -v c="$cpu_ms" -v r="$records" 'BEGIN { if (r > 0) printf "%.1fus", c * 1000 / r; else print "n/a" }')" \
	"rss_start=$((rss_idle / 1024))MiB rss_peak=$((peak / 1024))MiB rss_end=$((rss_end / 1024))MiB anon_start=$((anon_start / 1024))MiB anon_peak=$((anon_peak / 1024))MiB"
echo "ragwatch: records by outcome: $(get "http://$api/metrics" | awk '/^ragwatch_records_total\{/ { o = $1; sub(/.*outcome="/, "", o); sub(/".*/, "", o); s[o] += $NF } END { for (o in s) printf "%s=%.0f ", o, s[o] }')"
echo "ragwatch: spans_received=$(metric ragwatch_spans_received_total) rejected=$(metric ragwatch_ingest_rejected_total)" \
	"evicted=$(metric ragwatch_traces_evicted_total) late_spans=$(metric ragwatch_late_spans_total)" \
	"delivery_errors=$(metric ragwatch_assembly_delivery_errors_total) held=$(metric ragwatch_assembly_traces_held) join_state_errors=$(metric ragwatch_join_state_errors_total)" \
	"sampled=$(metric ragwatch_sampled_total) scoring_dropped=$(metric ragwatch_scoring_dropped_total) scorer_calls=$(metric ragwatch_scoring_attempts_total) queue_messages=$(metric ragwatch_scoring_queue_message_records_count)"
# The log records (loadgen --logs): what became of them, by outcome, and how many the receivers took.
echo "ragwatch: log_records_received=$(metric ragwatch_log_records_received_total) by outcome:$(get "http://$api/metrics" | awk '/^ragwatch_log_records_total\{/ { o = $1; sub(/.*outcome="/, "", o); sub(/".*/, "", o); s[o] += $NF } END { for (o in s) printf " %s=%.0f", o, s[o] }')"
assembled=$(get "http://$api/metrics" | awk '/^ragwatch_records_total\{/ && /outcome="assembled"/ { s += $NF } END { printf "%.0f", s }')
# One machine-readable line (scripts/anchor.sh reads it): CPU per trace sent, peak RSS (VmHWM).
echo "summary: sent=${sent:-0} assembled=$assembled cpu_ms=$cpu_ms cpu_us_per_trace=$(awk -v c="$cpu_ms" -v r="${sent:-0}" 'BEGIN { if (r > 0) printf "%.1f", c * 1000 / r; else print "n/a" }') vmhwm_mib=$((hwm / 1024))"
if n=$(grep -ciE 'level=(ERROR|WARN)' "$tmp/ragwatch.log"); then
	echo "ragwatch log ($n warnings/errors, first 5):"
	# awk reads to the end: head would close the pipe early and, under pipefail, fail the script
	grep -iE 'level=(ERROR|WARN)' "$tmp/ragwatch.log" | awk 'NR <= 5'
fi
