#!/usr/bin/env bash
# overlay.sh BIN [tests]: writes the -overlay JSON for Gatekeeper's build
# from vendor/ (paths must be absolute), and the one generated file it names,
# under BIN:
#   - zz_quotakeeper.go joins Gatekeeper's main package (our builtins and
#     plugin);
#   - the frameworks' Rego driver gets regodriver/zz_quotakeeper_prepared.go,
#     its eval with the query prepared once per template, and its own
#     driver.go with that one function renamed evalEachTime, so the rest of
#     the driver is the vendored code unchanged.
# With "tests", the JSON also lays the frameworks' own tests of that driver
# and of its client (from the module cache: vendor/ has no tests) and ours
# beside them, for `go test -mod=vendor` of those two packages.
# The generated driver.go goes in BIN/.gatekeeper-overlay: a directory whose
# name starts with a dot is no package to `go build ./...`.
# Fails when the vendored driver no longer has the eval it replaces, rather
# than building Gatekeeper without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
main_dir="$root/vendor/github.com/open-policy-agent/gatekeeper/v3"
frameworks="github.com/open-policy-agent/frameworks/constraint"
driver_dir="$root/vendor/$frameworks/pkg/client/drivers/rego"

signature='func (d \*Driver) eval(ctx context.Context, compiler \*ast.Compiler, target string, path \[\]string, input ast.Value, opts ...reviews.ReviewOpt) (rego.ResultSet, \*string, error) {'
if [ "$(grep -c "^$signature\$" "$driver_dir/driver.go")" != 1 ]; then
	echo "overlay.sh: $driver_dir/driver.go has no eval of the signature hack/gatekeeper/regodriver replaces" >&2
	exit 1
fi
mkdir -p "$out/.gatekeeper-overlay"
sed 's/^func (d \*Driver) eval(ctx /func (d *Driver) evalEachTime(ctx /' "$driver_dir/driver.go" > "$out/.gatekeeper-overlay/driver.go"

entries=(
	"$main_dir/zz_quotakeeper.go" "$root/hack/gatekeeper/zz_quotakeeper.go"
	"$driver_dir/driver.go" "$out/.gatekeeper-overlay/driver.go"
	"$driver_dir/zz_quotakeeper_prepared.go" "$root/hack/gatekeeper/regodriver/zz_quotakeeper_prepared.go"
)
if [ "${2:-}" = tests ]; then
	cached=$(go list -mod=mod -m -f '{{.Dir}}' "$frameworks")
	for pkg in pkg/client/drivers/rego pkg/client; do
		for f in "$cached/$pkg"/*_test.go; do
			entries+=("$root/vendor/$frameworks/$pkg/${f##*/}" "$f")
		done
	done
	entries+=("$driver_dir/zz_quotakeeper_prepared_test.go" "$root/hack/gatekeeper/regodriver/zz_quotakeeper_prepared_test.go")
fi

sep=
printf '{"Replace":{'
for ((i = 0; i < ${#entries[@]}; i += 2)); do
	printf '%s"%s":"%s"' "$sep" "${entries[i]}" "${entries[i+1]}"
	sep=,
done
printf '}}\n'
