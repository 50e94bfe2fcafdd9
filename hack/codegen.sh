#!/usr/bin/env bash
# The API module's typed clientset, listers and informers (api/client), by
# the Kubernetes code generators hack/tools/code-generator pins, for the
# kinds marked +genclient in api/v1alpha1. Run from the checkout's root by
# `make generate` with BIN set to where the generators were built.
set -euo pipefail
BIN=${BIN:?}
pkg=github.com/quotakeeper/quotakeeper/api
out=client
header=$PWD/hack/boilerplate.go.txt
cd api
rm -rf "$out"
"$BIN/client-gen" --go-header-file "$header" --clientset-name versioned \
	--input-base "${pkg%/api}" --input api/v1alpha1 \
	--output-dir "$out/clientset" --output-pkg "$pkg/$out/clientset"
"$BIN/lister-gen" --go-header-file "$header" \
	--output-dir "$out/listers" --output-pkg "$pkg/$out/listers" "$pkg/v1alpha1"
"$BIN/informer-gen" --go-header-file "$header" \
	--versioned-clientset-package "$pkg/$out/clientset/versioned" \
	--listers-package "$pkg/$out/listers" \
	--output-dir "$out/informers" --output-pkg "$pkg/$out/informers" "$pkg/v1alpha1"
