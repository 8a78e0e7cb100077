#!/usr/bin/env bash
# judge-matrix.sh — does a healthy, slow or dead LLM judge change what ingest costs?
# (docs/performance.md, "A slow or dead judge"). Starts three scripts/slowjudge processes on
# loopback (ok: valid verdicts after 1 s; slow: 503 after 5 s; dead: never answers), then for
# ROUNDS rounds runs scripts/ingest.sh with 10 % sampled against each judge and against no
# judge in the process (`scoring.workers: 0`, "queue"), at a fixed --rate 8000 and as fast as
# possible, rotating the order every round. Prints each run, then per rate and judge every
# run's traces/s and CPU per trace with their medians.
#
# Environment: RW (ragwatch binary; default: built by ingest.sh each run), ROUNDS (default 4),
# DURATION (default 15s), RATES (default "8000 0").
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the project's toolchain; machines start on an older Go with GOTOOLCHAIN=local
here=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-4} DURATION=${DURATION:-15s} RATES=${RATES:-"8000 0"}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

if [[ -z "${RW:-}" ]]; then
	RW=$tmp/ragwatch
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -ldflags "-s -w" -o "$RW" ./cmd/ragwatch)
fi
export RW
(cd "$here" && go build -o "$tmp/slowjudge" ./scripts/slowjudge)
declare -A port=([ok]=38711 [slow]=38712 [dead]=38713)
"$tmp/slowjudge" -addr 127.0.0.1:${port[ok]} -mode ok -latency 1s >"$tmp/ok.log" 2>&1 & pids+=($!)
"$tmp/slowjudge" -addr 127.0.0.1:${port[slow]} -mode slow -delay 5s >"$tmp/slow.log" 2>&1 & pids+=($!)
"$tmp/slowjudge" -addr 127.0.0.1:${port[dead]} -mode dead >"$tmp/dead.log" 2>&1 & pids+=($!)
sleep 1

modes=(queue ok slow dead)
out=$tmp/matrix.out
for r in $(seq 1 "$ROUNDS"); do
	for rate in $RATES; do
		for k in 0 1 2 3; do
			m=${modes[$(((k + r - 1) % 4))]}
			extra=$'sampling:\n  rate: 0.1\n'
			if [[ $m == queue ]]; then
				extra+=$'scoring:\n  workers: 0'
			else
				extra+=$'scoring:\n  backend: openai\n  openai:\n    base_url: http://127.0.0.1:'${port[$m]}$'/v1\n    model: judge\n    api_key_env: SLOWJUDGE_KEY'
			fi
			echo "=== round $r rate $rate judge $m" | tee -a "$out"
			RW_ENV=SLOWJUDGE_KEY=x WARMUP=5s CONFIG_EXTRA="$extra" \
				LOADGEN_ARGS="--rate $rate --duration $DURATION --spans 5 --documents 5 --doc-bytes 1024 --batch 50 --concurrency 4" \
				"$here/scripts/ingest.sh" 2>&1 | grep -v '^warmup' | tee -a "$out"
		done
	done
done

echo "=== summary (rate 0 = as fast as possible)"
awk '
/^=== round/ { rate=$5; judge=$7; next }
/^traces=/ { split($0, a, "rate="); r=a[2]; sub("/s.*", "", r); next }
/cpu_per_trace=/ { split($0, b, "cpu_per_trace="); c=b[2]; sub("us.*", "", c); k=rate" "judge; R[k]=R[k]" "r; C[k]=C[k]" "c }
END { for (k in R) print k "|" R[k] "|" C[k] }' "$out" | sort | while IFS='|' read -r k rs cs; do
	med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END { if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }
	printf "%-12s traces/s:%s median %s | cpu/trace us:%s median %s\n" "$k" "$rs" "$(echo "$rs" | med)" "$cs" "$(echo "$cs" | med)"
done
