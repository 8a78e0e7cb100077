#!/usr/bin/env bash
# e2e-deps.sh — make sure the servers the end-to-end suite runs are on PATH: prometheus, promtool
# and prometheus-alertmanager, from Debian's packages. As root it installs what is missing with
# apt-get; otherwise it says which command to run. `make e2e` (and so `make test`) calls it.
set -euo pipefail

need=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
((${#need[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
	echo "e2e-deps: missing ${need[*]}; install them with: sudo apt-get install ${need[*]}" >&2
	exit 1
fi
echo "e2e-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
