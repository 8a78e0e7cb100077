#!/usr/bin/env bash
# paired.sh — compare the CPU per trace of two ragwatch builds run side by side: each pair
# starts scripts/ingest.sh on build A and on build B at the same moment, each with its own
# loadgen sending the same traffic, so both see the same machine (the load of the host, the
# other tenants, the frequency). Runs one after the other (scripts/anchor.sh's ROUNDS) differ
# by 10-30 % on a shared machine and hide a change of a few percent; within a pair both builds
# share whatever the machine does. Prints each pair's figures and B's CPU per trace over A's,
# then the median of those ratios and how many pairs B spent less. Linux only (/proc).
#
# Environment:
#   A, B          the two ragwatch binaries (required); each pair runs a private copy of each
#   LG            the ragwatch binary whose loadgen sends (default: A); keep it fixed
#   PAIRS         how many pairs (default 4)
#   LOADGEN_ARGS  loadgen flags (default: 200,000 five-span traces, 5 x 1 KB documents,
#                 20 a request, 4 in flight, as fast as accepted)
#   CONFIG_EXTRA  YAML appended to both configs (default: sampling.rate: 0; set it empty to
#                 compare the defaults)
#   PROTOCOL      how the loadgens send, as in scripts/ingest.sh: grpc (default), http, http-json
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # the project's toolchain; machines start on an older Go with GOTOOLCHAIN=local

here=$(cd "$(dirname "$0")/.." && pwd)
: "${A:?A: the first ragwatch binary}" "${B:?B: the second ragwatch binary}"
LG=${LG:-$A}
PAIRS=${PAIRS:-4}
export LOADGEN_ARGS=${LOADGEN_ARGS:-"--rate 0 --count 200000 --spans 5 --documents 5 --doc-bytes 1024 --batch 20 --concurrency 4"}
export CONFIG_EXTRA=${CONFIG_EXTRA-$'sampling:\n  rate: 0'}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$A" "$tmp/a" # private copies: a binary's pages shared by both runs would blur their memory
cp "$B" "$tmp/b"

echo "# $(uptime)"
echo "# A=$A B=$B loadgen $LOADGEN_ARGS"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $(grep '^summary:' "$2")"; }
for i in $(seq 1 "$PAIRS"); do
	RW=$tmp/a LG=$LG SETTLE=${SETTLE:-20s} "$here/scripts/ingest.sh" >"$tmp/a.out" 2>&1 &
	pa=$!
	RW=$tmp/b LG=$LG SETTLE=${SETTLE:-20s} "$here/scripts/ingest.sh" >"$tmp/b.out" 2>&1 &
	pb=$!
	wait $pa || { echo "pair $i: the run of A failed:"; cat "$tmp/a.out"; exit 1; }
	wait $pb || { echo "pair $i: the run of B failed:"; cat "$tmp/b.out"; exit 1; }
	for x in a b; do
		sent=$(field sent "$tmp/$x.out") assembled=$(field assembled "$tmp/$x.out")
		if [[ -z "$sent" || "$sent" != "$assembled" ]]; then
			echo "pair $i: build $x assembled ${assembled:-?} of ${sent:-?} traces:"
			cat "$tmp/$x.out"
			exit 1
		fi
	done
	ua=$(field cpu_us_per_trace "$tmp/a.out") ub=$(field cpu_us_per_trace "$tmp/b.out")
	ratio=$(awk -v a="$ua" -v b="$ub" 'BEGIN { printf "%.3f", b / a }')
	echo "pair $i: A ${ua}us/trace $(field vmhwm_mib "$tmp/a.out")MiB, B ${ub}us/trace $(field vmhwm_mib "$tmp/b.out")MiB, B/A $ratio"
	echo "$ratio" >>"$tmp/ratios"
done
sort -g "$tmp/ratios" | awk '{ v[NR] = $1; if ($1 < 1) less++ }
	END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	      printf "paired: B/A median %.3f over %d pairs (%.3f-%.3f); B lower in %d\n", m, NR, v[1], v[NR], less }'
echo "# $(uptime)"
