# Stages of a CI run, timed against the budgets of docs/operations.md's
# table "The test loop" (sourced by .ci/run).
#
#   stage NAME COMMAND...      runs COMMAND now, its output on the console and in
#                              _output/ci/NAME.log
#   stage_bg NAME COMMAND...   the same in the background; stage_wait waits for
#                              every background stage
#   summary                    per stage: seconds, budget, a warning for
#                              each stage past its budget, and the disk left
#                              after it; then each Go package's test time
#                              from the logs; for a failed stage, the lines
#                              of its log that say why (why)
#
# A failed stage fails the run, but only after the summary: the figures of a
# red run are the ones most worth reading.

CI_LOG_DIR=${CI_LOG_DIR:-_output/ci}
CI_BUDGETS=${CI_BUDGETS:-docs/operations.md}
mkdir -p "$CI_LOG_DIR"
: >"$CI_LOG_DIR/stages.tsv"
CI_START=$(date +%s)
CI_FAILED=()
CI_PIDS=()

# budget NAME prints the stage's budget in seconds from the table, whose rows
# read | `NAME` | what it runs | warm | cold | budget |, the budget as "N min".
budget() {
	awk -F'|' -v stage="\`$1\`" '
		$2 ~ /^ *`/ { name = $2; gsub(/ /, "", name); if (name != stage) next
			b = $(NF-1); gsub(/^ +| +$/, "", b)
			if (b ~ /^[0-9]+ min$/) { sub(/ min$/, "", b); print b * 60; exit }
			if (b ~ /^[0-9]+ s$/) { sub(/ s$/, "", b); print b; exit } }' "$CI_BUDGETS"
}

# free_gib prints the disk left where the run writes (the checkout, and the
# Go caches beside it on a CI machine), in GiB: a cold run fills about 25 GiB,
# and a full disk fails a build with "no space left on device" halfway.
free_gib() {
	df -Pk . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}
echo "disk: $(free_gib) GiB free at the start (a cold run writes about 25 GiB: Go caches, bin/, _output/)"

# run_stage NAME COMMAND... runs one stage and records it; its status is the
# command's.
run_stage() {
	local name=$1 start rc
	shift
	start=$(date +%s)
	echo "=== stage $name: $*"
	"$@" 2>&1 | tee "$CI_LOG_DIR/$name.log"
	rc=${PIPESTATUS[0]}
	printf '%s\t%d\t%d\t%d\t%s\n' "$name" "$start" "$(date +%s)" "$rc" "$(free_gib)" >>"$CI_LOG_DIR/stages.tsv"
	echo "=== stage $name: exit $rc after $(($(date +%s) - start)) s, $(free_gib) GiB of disk free"
	return "$rc"
}

stage() {
	run_stage "$@" || CI_FAILED+=("$1")
}

# Background stages print into their logs only, not onto the console: two
# interleaved go test outputs are unreadable. The console gets their logs
# whole when they end (stage_wait).
stage_bg() {
	local name=$1
	run_stage "$@" >/dev/null 2>&1 &
	CI_PIDS+=("$!:$name")
	echo "=== stage $name started in the background (log: $CI_LOG_DIR/$name.log)"
}

stage_wait() {
	local entry pid name
	for entry in "${CI_PIDS[@]}"; do
		pid=${entry%%:*} name=${entry#*:}
		if ! wait "$pid"; then CI_FAILED+=("$name"); fi
		echo "=== stage $name (background) output:"
		cat "$CI_LOG_DIR/$name.log"
	done
	CI_PIDS=()
}

summary() {
	local name start end rc free took b over=0 flag
	echo
	echo "=== CI stages (budgets: $CI_BUDGETS, \"The test loop\")"
	printf '%-14s %8s %8s %8s %10s  %s\n' stage start took budget "disk free" result
	while IFS=$'\t' read -r name start end rc free; do
		took=$((end - start))
		b=$(budget "$name")
		flag=ok
		[ "$rc" = 0 ] || flag="FAILED (exit $rc)"
		if [ -z "$b" ]; then
			flag="$flag; no budget in the table"
		elif [ "$took" -gt "$b" ]; then
			flag="$flag; OVER BUDGET by $((took - b)) s"
			over=1
		fi
		printf '%-14s %7ds %7ds %8s %6s GiB  %s\n' "$name" "$((start - CI_START))" "$took" "${b:+${b}s}" "$free" "$flag"
	done <"$CI_LOG_DIR/stages.tsv"
	local total=$(($(date +%s) - CI_START)) tb
	tb=$(budget total)
	printf '%-14s %8s %7ds %8s\n' total "" "$total" "${tb:+${tb}s}"
	if [ -n "$tb" ] && [ "$total" -gt "$tb" ]; then over=1; fi
	echo
	echo "=== Go test packages, slowest first (seconds, stage)"
	for log in "$CI_LOG_DIR"/*.log; do
		awk -v stage="$(basename "$log" .log)" '
			$1 == "ok" && $3 ~ /^[0-9.]+s$/ { t = $3; sub(/s$/, "", t); printf "%8.1f  %-14s %s\n", t, stage, $2 }
			$1 == "FAIL" && $3 ~ /^[0-9.]+s$/ { t = $3; sub(/s$/, "", t); printf "%8.1f  %-14s %s FAIL\n", t, stage, $2 }' "$log"
	done | sort -rn | head -40
	# Every top-level test the stages ran (go test -v), by stage and package:
	# what CI covers, to compare from one change to the next.
	for log in "$CI_LOG_DIR"/*.log; do
		awk -v stage="$(basename "$log" .log)" '
			/^--- (PASS|FAIL|SKIP): (Test|Fuzz|Example)[^ \/]* / { n++; res[n] = $2; name[n] = $3; sub(/:$/, "", res[n]) }
			($1 == "ok" || $1 == "FAIL") && $2 ~ /\// { for (i = 1; i <= n; i++) printf "%s\t%s\t%s\t%s\n", stage, $2, name[i], res[i]; n = 0 }' "$log"
	done >"$CI_LOG_DIR/tests.tsv"
	echo
	echo "=== Tests run ($CI_LOG_DIR/tests.tsv): $(awk -F'\t' '$4 == "PASS"' "$CI_LOG_DIR/tests.tsv" | wc -l) passed, $(awk -F'\t' '$4 == "SKIP"' "$CI_LOG_DIR/tests.tsv" | wc -l) skipped, $(awk -F'\t' '$4 == "FAIL"' "$CI_LOG_DIR/tests.tsv" | wc -l) failed"
	awk -F'\t' '$4 == "SKIP" { print "  skipped: " $1 " " $2 " " $3 }' "$CI_LOG_DIR/tests.tsv"
	if [ "$over" = 1 ]; then
		echo
		echo "WARNING: a stage is over its budget: the loop is slower than docs/operations.md's table allows; find what grew before CI's limit finds it."
	fi
	if [ "${#CI_FAILED[@]}" -gt 0 ]; then
		for name in "${CI_FAILED[@]}"; do why "$name"; done
		echo "FAILED stages: ${CI_FAILED[*]}"
		return 1
	fi
}

# why NAME prints what in a failed stage's log says why it failed: failed
# tests and packages, panics, a cluster that did not start, make's errors,
# then the log's last lines. It comes last in the run's output because a
# CI page shows a long log's head and tail only.
why() {
	local log="$CI_LOG_DIR/$1.log"
	echo
	echo "=== why stage $1 failed (from $log)"
	grep -nE '^(--- FAIL|FAIL|panic:|fatal error:)|^ +--- FAIL|start cluster:|^install:|missing: run|make(\[[0-9]+\])?: \*\*\*|no space left|timed out' "$log" | head -60
	echo "--- its last lines:"
	tail -n 25 "$log"
}
