#!/usr/bin/env bash
# Writes a release's artifacts into RELEASE_DIR (`make release`, which builds
# Gatekeeper per image platform into BUILD_DIR/<os>/<arch>/gatekeeper first
# and passes the tools and flags in the environment). docs/operations.md,
# "Releases", lists what it writes; hack/tools/images/release_test.go
# checks it (`make release-test`).
#
# Every build is CGO_ENABLED=0 with -trimpath and the Makefile's -ldflags
# (the version), and archives are written with fixed owners, order and
# times (SOURCE_DATE_EPOCH): the same commit and Go release give the same
# files and image digests.
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${VERSION:?}" "${GATEKEEPER_VERSION:?}" "${LDFLAGS:?}" "${RELEASE_DIR:?}" "${BUILD_DIR:?}" "${RELEASE_URL:?}"
: "${IMAGE_PLATFORMS:?}" "${CLI_PLATFORMS:?}" "${IMAGES_TOOL:?}" "${IMAGE_SOURCE:?}" "${HELM:?}" "${CYCLONEDX_GOMOD:?}"
: "${SOURCE_DATE_EPOCH:=0}"

# The version scheme: vMAJOR.MINOR.PATCH with an optional -prerelease
# (semver 2.0, as git describe of a tag gives it). The chart's version is
# the same without the v.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if ! [[ $VERSION =~ $semver ]]; then
	echo "release: VERSION '$VERSION' is not vMAJOR.MINOR.PATCH[-PRERELEASE]: tag the commit (git tag v0.1.0) or pass VERSION=" >&2
	exit 1
fi
chart_version=${VERSION#v}

# The release notes: CHANGELOG.md's section for the version (## [X.Y.Z]);
# a prerelease without a section of its own takes ## [Unreleased]. A
# release without notes is refused before anything is built.
notes() {
	awk -v want="$1" '
		/^## \[/ { if (on) exit; on = (index($0, "## [" want "]") == 1); next }
		on { print }
	' CHANGELOG.md | sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
}
release_notes=$(notes "$chart_version")
if [ -z "$release_notes" ] && [[ $chart_version == *-* ]]; then
	release_notes=$(notes Unreleased)
fi
if [ -z "$release_notes" ]; then
	echo "release: CHANGELOG.md has no section '## [$chart_version]' (or, for a prerelease, '## [Unreleased]') with notes" >&2
	exit 1
fi
# CHECK_ONLY=1: only the version and notes (make release checks them before
# its Gatekeeper builds).
[ "${CHECK_ONLY:-}" = 1 ] && exit 0

rm -rf "$RELEASE_DIR"
mkdir -p "$RELEASE_DIR/images"

# -trimpath and the -ldflags as the Makefile's own builds (make test's
# linux/amd64 builds are then in the build cache); no VCS stamp: the
# version is in -ldflags, and a stamp would differ between a clean and a
# touched checkout of the same commit.
# Other platforms than this machine's build in CROSS_GOCACHE when it is set
# (the Makefile's RELEASE_CROSS_GOCACHE).
build() { # build GOOS GOARCH OUT PACKAGE
	local cache
	cache=$(go env GOCACHE)
	[ "$1/$2" = "$HOST_PLATFORM" ] || cache=${CROSS_GOCACHE:-$cache}
	GOCACHE=$cache CGO_ENABLED=0 GOOS=$1 GOARCH=$2 go build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$3" "$4"
}

# A CycloneDX SBOM of a binary: its module graph as the linker recorded it
# (`go version -m`), so it lists exactly the modules in the shipped bytes,
# for any platform, and for Gatekeeper, whose main package is a dependency's.
# No serial number or timestamp: the same binary gives the same SBOM. The
# purls' goos and goarch come from `go env`, hence GOOS and GOARCH here. The
# main component's version: ours is the release's; Gatekeeper's build has
# Gatekeeper's module as its main module, at the release go.mod pins.
sbom() { # sbom BINARY OUT GOOS GOARCH VERSION
	GOOS=$3 GOARCH=$4 "$CYCLONEDX_GOMOD" bin -json -noserial -notimestamp -version "$5" -output "$2" "$1"
	# The API module is replaced by its directory (go.mod: replace ... =>
	# ./api), which the SBOM names "./api" at "(devel)": it is the module
	# github.com/quotakeeper/quotakeeper/api at this release (tagged
	# api/$VERSION). Its version is the line after its name.
	sed -i -e "s#pkg:golang/\./api@(devel)#pkg:golang/github.com/quotakeeper/quotakeeper/api@$VERSION#g" \
		-e "/\"name\": \"\.\/api\"/{s#\"name\": \"\./api\"#\"name\": \"github.com/quotakeeper/quotakeeper/api\"#;n;s#\"version\": \"(devel)\"#\"version\": \"$VERSION\"#}" "$2"
}

# Server images: one OCI layout per image, an image index of one image per
# platform, checked by the images tool as `make images` checks its own.
image_args=(--version "$VERSION")
for p in $IMAGE_PLATFORMS; do
	echo "building quotakeeper-manager for $p"
	build "${p%/*}" "${p#*/}" "$BUILD_DIR/$p/quotakeeper-manager" ./cmd/quotakeeper-manager
done
for pair in gatekeeper-quotakeeper:gatekeeper quotakeeper-manager:quotakeeper-manager; do
	image=${pair%%:*} binary=${pair#*:}
	binaries=()
	for p in $IMAGE_PLATFORMS; do
		binaries+=(--binary "$BUILD_DIR/$p/$binary")
		main_version=$VERSION
		[ "$binary" = gatekeeper ] && main_version=$GATEKEEPER_VERSION
		sbom "$BUILD_DIR/$p/$binary" "$RELEASE_DIR/${image}_${VERSION}_${p%/*}_${p#*/}.cdx.json" "${p%/*}" "${p#*/}" "$main_version"
	done
	"$IMAGES_TOOL" build --name "$image" "${binaries[@]}" "${image_args[@]}" --source "$IMAGE_SOURCE" \
		--out "$RELEASE_DIR/images" ${IMAGE_BASE:+--base "$IMAGE_BASE"}
	"$IMAGES_TOOL" verify --name "$image" "${binaries[@]}" "${image_args[@]}" --dir "$RELEASE_DIR/images"
done

# The command-line tools: name_version_os_arch.tar.gz holding the binary
# and LICENSE (the krew manifest installs both).
for cli in kubectl-quota quotactl; do
	for p in $CLI_PLATFORMS; do
		os=${p%/*} arch=${p#*/}
		echo "building $cli for $p"
		stage="$BUILD_DIR/archive/${cli}_${os}_${arch}"
		rm -rf "$stage"
		mkdir -p "$stage"
		build "$os" "$arch" "$stage/$cli" "./cmd/$cli"
		cp LICENSE "$stage/LICENSE"
		base="${cli}_${VERSION}_${os}_${arch}"
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
			--mode='u+rwX,go+rX,go-w' -C "$stage" -cf - "$cli" LICENSE | gzip -9 -n > "$RELEASE_DIR/$base.tar.gz"
		sbom "$stage/$cli" "$RELEASE_DIR/$base.cdx.json" "$os" "$arch" "$VERSION"
	done
done

# The chart, with the release's version and images' tag.
"$HELM" package charts/quotakeeper --version "$chart_version" --app-version "$VERSION" -d "$RELEASE_DIR" >/dev/null

# The CRDs in one file, for GitOps tools that install CRDs apart.
cat config/crd/quota.miloapis.com_*.yaml > "$RELEASE_DIR/quotakeeper-crds.yaml"

# The krew manifest for `kubectl quota` (krew-index's plugins/quota.yaml).
{
	cat <<MANIFEST
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: quota
spec:
  version: $VERSION
  homepage: $IMAGE_SOURCE
  shortDescription: Show quotakeeper quota usage and explain admission decisions
  description: |
    kubectl quota shows the quota a consumer holds and uses (kubectl quota
    usage) and explains why quotakeeper admitted or denied an object
    (kubectl quota explain), from quotakeeper's AllowanceBuckets,
    ResourceGrants and ResourceClaims.
  platforms:
MANIFEST
	for p in $CLI_PLATFORMS; do
		os=${p%/*} arch=${p#*/}
		archive="kubectl-quota_${VERSION}_${os}_${arch}.tar.gz"
		cat <<MANIFEST
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $RELEASE_URL/$archive
    sha256: $(sha256sum "$RELEASE_DIR/$archive" | cut -d' ' -f1)
    bin: kubectl-quota
    files:
    - from: kubectl-quota
      to: .
    - from: LICENSE
      to: .
MANIFEST
	done
} > "$RELEASE_DIR/krew-quota.yaml"

printf '%s\n' "$release_notes" > "$RELEASE_DIR/RELEASE_NOTES.md"

# Checksums of every file a release page carries (the image layouts are
# content-addressed already).
(cd "$RELEASE_DIR" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
echo "release $VERSION in $RELEASE_DIR:"
(cd "$RELEASE_DIR" && ls -1 . images)
