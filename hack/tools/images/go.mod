// Module images builds the container images `make images` and `make
// release` write (an OCI layout, and for one platform a docker-loadable
// tarball, per server) without a container runtime, with
// go-containerregistry; release_test.go checks a release (`make
// release-test`). A module of its own so that its
// dependencies never touch the main module's graph (Gatekeeper's build
// depends on that one).
module github.com/quotakeeper/quotakeeper/hack/tools/images

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
