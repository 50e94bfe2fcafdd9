#!/usr/bin/env bash
# Writes the -overlay JSON that adds zz_quotakeeper.go to Gatekeeper's
# vendored main package. Paths must be absolute.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
main_dir="$root/vendor/github.com/open-policy-agent/gatekeeper/v3"
printf '{"Replace":{"%s/zz_quotakeeper.go":"%s/hack/gatekeeper/zz_quotakeeper.go"}}\n' "$main_dir" "$root"
