// Module images builds the container images `make images` writes (an OCI
// layout and a docker-loadable tarball per server) without a container
// runtime, with go-containerregistry. A module of its own so that its
// dependencies never touch the main module's graph (Gatekeeper's build
// depends on that one).
module github.com/quotakeeper/quotakeeper/hack/tools/images

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
