#!/usr/bin/env bash
# deps.sh is `make deps`: it installs the Debian packages the tests need
# when they are missing (make test runs it first; CI starts on a machine
# without them):
#   chromium   the dashboard's tests draw the page in headless Chromium
#              (internal/browser, examples/fleet TestFleet).
#   postgresql the store tests of the shuffler and the collector run
#              against a throwaway PostgreSQL server started from its
#              binaries in /usr/lib/postgresql/<version>/bin (internal/pgtest).
#   haproxy    the deployment kit's balancer (deploy/haproxy), which
#              make demo-replicas and its test run in front of the replicas.
# It needs root for apt-get; without root it names what is missing.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "make deps: missing Debian packages: ${missing[*]}; as root: apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "make deps: installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
