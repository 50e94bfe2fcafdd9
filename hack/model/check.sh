#!/usr/bin/env bash
# Checks the protocol's model (model/quota.pml) with SPIN, as make model and
# make test run it (docs/design/model.md):
#
#   1. every scope below, exhaustively: SPIN visits every reachable state and
#      every assertion (LIMIT, COVER, SETTLED) holds in each; a scope whose
#      search does not complete within MODEL_MEMORY_MB fails, since a partial
#      search proves nothing;
#   2. every seeded bug below must fail, with a counterexample: a model that
#      cannot fail on a known bug proves nothing either. Searched breadth
#      first, so the trail is a shortest one.
#
# A failure prints the counterexample as the sequence of actions ("QK ..."
# lines, model/quota.pml's printf), not SPIN's state dump.
#
# usage: hack/model/check.sh full|bounded
#   full     every scope (make model: minutes, a few GiB)
#   bounded  the scopes marked bounded (make test: under a minute)
set -euo pipefail

mode=${1:-full}
model=$(cd "$(dirname "$0")/../.." && pwd)/model/quota.pml
spin=${SPIN:-spin}
memory=${MODEL_MEMORY_MB:-8192}

# name, whether make test runs it, and the -D settings (model/quota.pml's
# header lists them): together every action of the model, each scope as
# large as stays within minutes.
scopes=(
	"protocol       bounded -DNOLEASES -DMAXT=2"
	"lease          bounded -DLEASERS=1 -DNOGROW -DMAXT=2"
	"protocol-long  full    -DNOLEASES -DMAXT=3"
	"protocol-4     full    -DNOLEASES -DMAXT=2 -DNOBJ=4 -DLIMIT0=3 -DLIMIT1=2"
	"lease-growth   full    -DLEASERS=1 -DNORESTART -DMAXT=2"
	"two-leases     full    -DLEASERS=2 -DNOGROW -DNORESTART -DMAXT=2"
	"stale-grants   full    -DSTALE_GRANTS -DNOLEASES -DNORESTART -DMAXT=2"
)
# Each seeded bug, the scope it is checked in, and what it breaks.
bugs=(
	"BUG_FREE_BEFORE_BARRIER|-DNOLEASES -DMAXT=2|a sum freed as soon as the observer sees it"
	"BUG_LEASE_NO_BARRIER|-DLEASERS=1 -DNOGROW -DMAXT=2|a lapsed lease taken back without the barrier"
	"BUG_FOLD_WITHOUT_TOTAL|-DNOLEASES -DMAXT=2|a growth folded once counted at its generation, whatever its amount"
	"BUG_EXPIRE_EARLY|-DNOLEASES -DMAXT=2|a create's reservation expired before its TTL"
	"BUG_LIMIT_FROM_CACHE|-DSTALE_GRANTS -DNOLEASES -DNORESTART -DMAXT=2|every writer decides by, and records, its own grant cache's limit"
)
# The assumptions the scopes make (docs/design/model.md), each relaxed: each
# must fail too, which shows the property rests on it (make model only).
assumptions=(
	"DEADLINE=3|-DNOLEASES -DMAXT=2|a request stored later than the reservation's TTL"
	"SLOW_OBSERVER|-DNOLEASES -DMAXT=2 -DNORESTART|an observer that lags by more than a TTL"
)

if ! command -v "$spin" >/dev/null; then
	echo "spin is not installed: apt-get install spin (make spin does it as root)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/quota.pml"
cd "$work"

# pan FLAGS... builds the verifier for FLAGS; PAN_CFLAGS adds C settings.
pan() {
	rm -f pan pan.* quota.pml.trail
	"$spin" -a "$@" quota.pml >/dev/null
	# -DCOLLAPSE: exact state compression (not hashing away states);
	# -DSAFETY: assertions and end states, no cycle checks.
	gcc -O2 -w -DSAFETY -DMEMLIM="$memory" ${PAN_CFLAGS:-} -o pan pan.c
}

# trail FLAGS... prints the counterexample SPIN wrote, as actions.
trail() {
	"$spin" -t -T -B "$@" quota.pml | grep -E '^QK|assert' || true
}

# broken TRAIL names the property a counterexample breaks (the model's
# header): the monitor prints "QK cover" before it fails, the end "QK
# settled", and LIMIT's assertion compares with the grant.
broken() {
	case "$1" in
	*"QK cover"*) echo "COVER (allocated + reserved below what the objects use)" ;;
	*"<=grant"* | *"(grant)"*) echo "LIMIT (admitted past the grant)" ;;
	*"QK settled"*) echo "SETTLED (not exact once quiet)" ;;
	*) grep -m1 -oE 'assertion violated.{0,80}|invalid end state' <<<"$1" || echo "an assertion" ;;
	esac
}

failed=0
printf '%-15s %12s %8s %9s  %s\n' scope states seconds "MiB" result
for line in "${scopes[@]}"; do
	read -r name when flags <<<"$line"
	[ "$mode" = full ] || [ "$when" = bounded ] || continue
	# shellcheck disable=SC2086 # flags are words
	PAN_CFLAGS=-DCOLLAPSE pan $flags
	out=$(./pan -m2000000 2>&1 || true)
	states=$(awk '/states, stored/ { print $1; exit }' <<<"$out")
	secs=$(awk '/elapsed time/ { print $4; exit }' <<<"$out")
	mib=$(awk '/total actual memory usage/ { print $1; exit }' <<<"$out")
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | head -1)
	if grep -q 'Search not completed\|reached -DMEMLIM' <<<"$out"; then
		result="FAILED: search not complete within ${memory} MiB (MODEL_MEMORY_MB)"
		failed=1
	elif [ "$errors" != 0 ]; then
		# shellcheck disable=SC2086
		result="FAILED: $(broken "$(trail $flags)")"
		failed=1
	else
		result="ok ($flags)"
	fi
	printf '%-15s %12s %8s %9s  %s\n' "$name" "$states" "$secs" "$mib" "$result"
	if [ "$errors" != 0 ] && [ -f quota.pml.trail ]; then
		echo "counterexample ($name: spin -t -T $flags model/quota.pml):"
		# shellcheck disable=SC2086
		trail $flags | sed 's/^/  /'
	fi
done

echo
echo "seeded bugs$([ "$mode" = full ] && echo " and relaxed assumptions") (each must fail):"
cases=("${bugs[@]}")
[ "$mode" = full ] && cases+=("${assumptions[@]}")
for line in "${cases[@]}"; do
	IFS='|' read -r bug flags what <<<"$line"
	# shellcheck disable=SC2086
	PAN_CFLAGS=-DBFS pan -DBREADTH_FIRST -D"$bug" $flags
	out=$(./pan 2>&1 || true)
	if [ -f quota.pml.trail ]; then
		# shellcheck disable=SC2086
		steps=$(trail -DBREADTH_FIRST -D"$bug" $flags)
		echo "  $bug ($what): breaks $(broken "$steps"), after $(grep '^QK' <<<"$steps" | grep -cvE '^QK (bucket|counted|cover|settled) ') actions"
		if [ "$mode" = full ]; then
			sed 's/^/      /' <<<"$steps"
		fi
	else
		echo "  $bug ($what): NOT FOUND: the model no longer catches it"
		failed=1
	fi
done
exit "$failed"
