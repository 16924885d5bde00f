#!/usr/bin/env bash
# demo.sh is `make demo`: it starts `blanket serve` (the shuffler and the
# collector on one free loopback port, with a fresh data dir and the plan,
# calibrated at start), waits until it serves, runs the simulated fleet
# against it, stops the server and exits with the fleet's status.
#
# usage: [TRAVEL=joint|parallel|separate] demo.sh BLANKET FLEET PLAN OUTDIR [fleet flags...]
# (TRAVEL defaults to joint; see below)
set -euo pipefail

blanket=$1 fleet=$2 plan=$3 out=$4
shift 4
mkdir -p "$out"
# TRAVEL=joint|parallel|separate overrides the plan's travel mode; the
# demo sends the three metrics jointly unless told otherwise. With
# admission on, each message needs an admission token (blinded, issued and
# verified: ristretto255 arithmetic on both sides, which this one machine
# does for 100,000 apps and the server at once): one per user and day
# jointly, three per user and day with TRAVEL=separate, which takes about
# 5 minutes on 2 cores against under 3 jointly.
TRAVEL=${TRAVEL:-joint}
if [ -n "$TRAVEL" ]; then
	case $TRAVEL in
	joint | parallel | separate) ;;
	*) echo "demo: TRAVEL=$TRAVEL: must be joint, parallel or separate" >&2; exit 2 ;;
	esac
	sed "s/^travel: .*/travel: $TRAVEL/" "$plan" >"$out/plan-$TRAVEL.yaml"
	plan=$out/plan-$TRAVEL.yaml
fi
data=$(mktemp -d "${TMPDIR:-/tmp}/blanket-demo.XXXXXX")
server=
# The key apps pin, read out of band from the collector's data dir before
# the server starts (blanket serve then signs its plan with it).
planKey=$("$blanket" collector plan-key --data "$data")

cleanup() {
	if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
	fi
	rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Port 0: the server picks a free port and prints "blanket serve listening
# on URL" once it serves (after calibrating the plan). The fleet simulates
# the last week, so the shuffler takes late reports of periods up to 8 days
# old (--period-grace; the plan's grace is 8 periods by default). While a day's grace
# lasts its pool goes out only down to its last n_min, once the fleet stops
# adding to it for 5 s (--settle); when every report is sent, the fleet
# closes the simulated days on the admin listener (POST /v1/pools/close),
# as their deadlines would days later, and the rest goes out.
# Admission is on: the fleet plays the apps' identity provider. Its key
# signs each simulated instance's JWT (iss and aud blanket-demo), and the
# server's issuer checks them against the key set written here (--jwks).
"$fleet" -write-jwt-key "$data/fleet-jwt.key" -write-jwks "$data/jwks.json"
echo "== blanket serve --addr 127.0.0.1:0 --plan $plan --period-grace 192h --settle 5s --jwks $data/jwks.json --jwt-issuer blanket-demo --jwt-audience blanket-demo (data in $data, log in $out/serve.log)"
"$blanket" serve --data "$data" --plan "$plan" --addr 127.0.0.1:0 --period-grace 192h --settle 5s --jwks "$data/jwks.json" --jwt-issuer blanket-demo --jwt-audience blanket-demo >"$out/serve.out" 2>"$out/serve.log" &
server=$!
url=
for _ in $(seq 600); do
	url=$(sed -n 's/^blanket serve listening on //p' "$out/serve.out" | head -n 1)
	[ -n "$url" ] && break
	if ! kill -0 "$server" 2>/dev/null; then
		echo "demo: blanket serve exited; the end of $out/serve.log:" >&2
		tail -n 20 "$out/serve.log" >&2
		exit 1
	fi
	sleep 0.2
done
if [ -z "$url" ]; then
	echo "demo: blanket serve did not start within 120s; see $out/serve.log" >&2
	exit 1
fi
admin=
for _ in $(seq 50); do
	admin=$(sed -n 's/^blanket serve admin listening on //p' "$out/serve.out" | head -n 1)
	[ -n "$admin" ] && break
	sleep 0.1
done
echo "   listening on $url; the operator's dashboard and metrics: $admin/; plan key $planKey"

echo "== fleet: simulated app instances reporting through sdk/client"
status=0
"$fleet" -endpoint "$url" -plan-key "$planKey" -jwt-key "$data/fleet-jwt.key" -wait 2m -dashboard "${admin:-$url}" -screenshot "$out/dashboard.png" "$@" || status=$?
if [ "$status" -ne 0 ] && ! kill -0 "$server" 2>/dev/null; then
	echo "demo: the server exited; the end of $out/serve.log:" >&2
	tail -n 20 "$out/serve.log" >&2
fi
echo "== demo finished in ${SECONDS}s with status $status"
exit "$status"
