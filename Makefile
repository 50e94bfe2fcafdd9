# quotakeeper — see README.md. Every tool comes from go.mod (`go tool`) or is
# built from Go module sources into bin/, keyed by version, so a fresh machine
# with Go, gcc, make, git and kubectl needs nothing else.

KUBE_VERSION ?= v1.36.3
ETCD_VERSION ?= v3.6.16
BIN          := $(CURDIR)/bin
TESTBIN      := $(BIN)/testbin
KUBE_APISERVER := $(TESTBIN)/kube-apiserver-$(KUBE_VERSION)
# The end-to-end bed runs kube-controller-manager for its garbage collector.
KUBE_CONTROLLER_MANAGER := $(TESTBIN)/kube-controller-manager-$(KUBE_VERSION)
ETCD           := $(TESTBIN)/etcd-$(ETCD_VERSION)
# envtest reads its binaries from KUBEBUILDER_ASSETS: one directory per version pair.
ASSETS := $(TESTBIN)/k8s-$(KUBE_VERSION)-etcd-$(ETCD_VERSION)
export KUBEBUILDER_ASSETS := $(ASSETS)

# The real-node test bed (make node-e2e, test/node): kubelet, kube-proxy and
# kube-scheduler from the same Kubernetes module as kube-apiserver, containerd
# (with ctr and its runc shim), the CNI plugins and CoreDNS (the cluster DNS,
# run as a pod) from their own modules under hack/testbin, runc and iptables
# from Debian, and a pause image of our own (hack/testbin/pause). The test
# reads them from one directory per version set, as envtest reads
# KUBEBUILDER_ASSETS.
NODEBIN := $(BIN)/node
CONTAINERD_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/containerd/containerd/v2") print $$(i+1)}' hack/testbin/containerd/go.mod)
CNI_PLUGINS_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/containernetworking/plugins") print $$(i+1)}' hack/testbin/cni-plugins/go.mod)
COREDNS_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/coredns/coredns") print $$(i+1)}' hack/testbin/coredns/go.mod)
KUBELET        := $(NODEBIN)/kubelet-$(KUBE_VERSION)
KUBE_SCHEDULER := $(NODEBIN)/kube-scheduler-$(KUBE_VERSION)
KUBE_PROXY     := $(NODEBIN)/kube-proxy-$(KUBE_VERSION)
CONTAINERD     := $(NODEBIN)/containerd-$(CONTAINERD_VERSION)
CNI_PLUGINS    := $(NODEBIN)/cni-plugins-$(CNI_PLUGINS_VERSION)
COREDNS        := $(NODEBIN)/coredns-$(COREDNS_VERSION)
NODE_ASSETS    := $(NODEBIN)/k8s-$(KUBE_VERSION)-containerd-$(CONTAINERD_VERSION)-cni-$(CNI_PLUGINS_VERSION)-coredns-$(COREDNS_VERSION)
# Debian's runc (1.1.5 in bookworm), which containerd's shim runs, iproute2's
# ip, with which the bed makes its bridge and address, and iptables, which
# kube-proxy programs the Services with.
RUNC           := /usr/sbin/runc
IPROUTE        := /bin/ip
IPTABLES       := /usr/sbin/iptables

# golangci-lint is built from its own module (hack/tools/golangci-lint), so its
# dependencies never enter the main module's graph; the version is go.mod's.
GOLANGCI_LINT_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/golangci/golangci-lint/v2") print $$(i+1)}' hack/tools/golangci-lint/go.mod)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
# promtool checks config/prometheus/rules.yaml; built the same way, from
# hack/tools/promtool, keyed by the Prometheus module version.
PROMTOOL_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/prometheus/prometheus") print $$(i+1)}' hack/tools/promtool/go.mod)
PROMTOOL := $(BIN)/promtool-$(PROMTOOL_VERSION)
CRD_REF_DOCS_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/elastic/crd-ref-docs") print $$(i+1)}' hack/tools/crd-ref-docs/go.mod)
CRD_REF_DOCS := $(BIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)
# The Kubernetes code generators, at the version the API module builds on
# (hack/tools/code-generator), for api/client.
CODEGEN_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "k8s.io/code-generator") print $$(i+1)}' hack/tools/code-generator/go.mod)
CODEGEN := $(BIN)/codegen-$(CODEGEN_VERSION)
# The image tool (hack/tools/images, our code on go-containerregistry) is built
# from its own module too, keyed by the go-containerregistry version and rebuilt
# when its sources change.
GGCR_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/google/go-containerregistry") print $$(i+1)}' hack/tools/images/go.mod)
IMAGES_TOOL := $(BIN)/images-ggcr-$(GGCR_VERSION)
# Helm renders and lints charts/quotakeeper in verify, and the end-to-end bed
# installs what `helm template` renders; built from hack/tools/helm.
HELM_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "helm.sh/helm/v3") print $$(i+1)}' hack/tools/helm/go.mod)
HELM := $(BIN)/helm-$(HELM_VERSION)
# cyclonedx-gomod writes the release SBOMs (make release), built from
# hack/tools/cyclonedx-gomod, keyed by its module version.
CYCLONEDX_GOMOD_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/CycloneDX/cyclonedx-gomod") print $$(i+1)}' hack/tools/cyclonedx-gomod/go.mod)
CYCLONEDX_GOMOD := $(BIN)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

# V=1: every test's name and result (.ci/run lists them: _output/ci/tests.tsv).
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m $(if $(V),-v)

# The version every binary prints (--version; quotactl version): git describe
# of the checkout, "dev" outside git. Releases are cut from tags vMAJOR.MINOR.PATCH
# (docs/operations.md#releases), so on a tagged commit this is the release. Gatekeeper's own version variable gets
# the release go.mod pins, as Gatekeeper's Makefile sets it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GATEKEEPER_VERSION := $(shell awk '$$1 == "github.com/open-policy-agent/gatekeeper/v3" {print $$2}' go.mod)
# Gatekeeper's stock Helm chart, from its module in the module cache.
GATEKEEPER_CHART = $(shell go list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3)/charts/gatekeeper
LDFLAGS := -X github.com/quotakeeper/quotakeeper/internal/version.Version=$(VERSION)
# -trimpath: no path of this machine in a binary, so a release is the same
# bytes wherever it is built; and make test's builds fill the build cache
# with what make release's linux/amd64 builds then only link.
GO_BUILD_FLAGS := -trimpath -ldflags '$(LDFLAGS)'
# The binaries we ship are linked statically, without cgo, so they run on a
# distroless static base (no libc). Only those builds: the race detector of
# `go test -race` needs cgo. test/binaries checks the outputs.
STATIC := CGO_ENABLED=0

.PHONY: all build tools generate verify lint vet model test test-e2e e2e-bins test-e2e-builtins test-e2e-stock test-e2e-leases unit fuzz bench testbin node-bin node-e2e gatekeeper gatekeeper-stock manager quotactl kubectl-quota images release release-test e2e faults exactness run load clean help

all: build

help: ## Show the targets.
	@grep -E '^[a-z0-9%-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## Compile every package.
	go build ./...

QUOTACTL := go run ./cmd/quotactl

generate: $(CRD_REF_DOCS) $(CODEGEN) ## Regenerate deepcopy code, CRDs, the API module's clientset, listers and informers, RBAC, webhook manifests, templates, the chart's copies of them, the Rego capabilities file and the API reference.
	go tool controller-gen object paths=github.com/quotakeeper/quotakeeper/api/...
	go tool controller-gen crd paths=github.com/quotakeeper/quotakeeper/api/... output:crd:dir=config/crd
	go tool controller-gen rbac:roleName=quotakeeper-manager webhook paths=./internal/controllers/... paths=./internal/webhooks/... paths=./cmd/quotakeeper-manager/... output:rbac:dir=config/rbac output:webhook:dir=config/webhook
	$(QUOTACTL) generate
	$(QUOTACTL) capabilities > rego/capabilities.json
	hack/prometheus/prometheusrule.sh config/prometheus/rules.yaml > config/prometheus/prometheusrule.yaml
	BIN=$(CODEGEN) hack/codegen.sh
	$(CRD_REF_DOCS) --log-level=error --source-path=api/v1alpha1 --config=hack/crd-ref-docs.yaml --renderer=markdown --output-path=docs/reference/api.md
	hack/chart/generate.sh

verify: generate $(GOLANGCI_LINT) $(PROMTOOL) $(HELM) ## Fail when generated files are stale, code is unformatted, or vet or golangci-lint complains.
	@changed=$$(git status --porcelain -- api config rego templates charts docs/reference); \
	if [ -n "$$changed" ]; then echo "generated files are stale; run 'make generate' and commit:"; echo "$$changed"; git diff --stat -- api config charts; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@# go mod tidy -diff gives the same answer on any day only for a module
	@# whose go.mod already names a module for every package it imports (under
	@# any build tag): tidy then reads the pinned versions and go.sum and asks
	@# the proxy for nothing newer. It resolves "latest" only for an import
	@# no requirement provides, so every module here keeps its graph whole,
	@# and no check uses -e (which hid an import promtool's go.mod did not
	@# pin, github.com/hashicorp/nomad/api, until the proxy began to serve
	@# it and tidy picked that day's newest commit). A new upstream release
	@# changes nothing here: nothing is resolved against it.
	go mod tidy -diff
	cd api && go mod tidy -diff
	cd hack/tools/golangci-lint && go mod tidy -diff
	cd hack/tools/crd-ref-docs && go mod tidy -diff
	cd hack/tools/code-generator && go mod tidy -diff
	cd hack/tools/promtool && go mod tidy -diff
	cd hack/tools/images && go mod tidy -diff
	cd hack/tools/helm && go mod tidy -diff
	cd hack/tools/cyclonedx-gomod && go mod tidy -diff
	cd hack/testbin/kube-apiserver && go mod tidy -diff
	cd hack/testbin/etcd && go mod tidy -diff
	cd hack/testbin/containerd && go mod tidy -diff
	cd hack/testbin/cni-plugins && go mod tidy -diff
	cd hack/testbin/coredns && go mod tidy -diff
	go vet ./...
	cd api && go vet ./...
	cd hack/tools/images && go vet ./...
	@# The API module is what owning services import: the types need
	@# apimachinery only, the generated clients client-go too, and nothing
	@# of it needs Gatekeeper, OPA or a controller framework.
	@heavy=$$(cd api && { go list -deps ./v1alpha1 ./names | grep -E '^k8s.io/client-go/'; go list -deps ./... | grep -E '^(github.com/open-policy-agent|sigs.k8s.io/controller-runtime|github.com/quotakeeper/quotakeeper/internal)'; } || true); \
	if [ -n "$$heavy" ]; then echo "the api module imports more than the API needs:"; echo "$$heavy"; exit 1; fi
	@# No binary links the test tree: depguard refuses the import in product
	@# code, and this checks what every binary and the plugin actually link.
	@linked=$$(go list -deps ./cmd/... ./plugin | grep '^github.com/quotakeeper/quotakeeper/test' || true); \
	if [ -n "$$linked" ]; then echo "a binary links test code:"; echo "$$linked"; exit 1; fi
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd api && $(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd hack/tools/images && $(GOLANGCI_LINT) run --allow-serial-runners ./...
	$(QUOTACTL) opa fmt --list --fail rego/
	$(QUOTACTL) opa check --strict --capabilities rego/capabilities.json rego/
	$(PROMTOOL) check rules config/prometheus/rules.yaml
	$(PROMTOOL) test rules config/prometheus/rules_test.yaml
	kubectl kustomize config/default > /dev/null
	@# Both charts as the docs install them: ours with its defaults and with
	@# the samples, Gatekeeper's stock chart (from the module cache, the
	@# release go.mod pins) with config/gatekeeper's values, for the
	@# Kubernetes release the bed runs (the stock chart renders the webhook's
	@# matchConditions only from 1.28 on; helm template assumes 1.20).
	$(HELM) lint --strict charts/quotakeeper
	$(HELM) lint --strict charts/quotakeeper --set samples.enabled=true
	$(HELM) template quotakeeper charts/quotakeeper -n quotakeeper-system > /dev/null
	$(HELM) template quotakeeper charts/quotakeeper -n quotakeeper-system --set samples.enabled=true > /dev/null
	$(HELM) template quotakeeper charts/quotakeeper -n quotakeeper-system --set admission=externalData --set samples.enabled=true > /dev/null
	$(HELM) lint $(GATEKEEPER_CHART) --kube-version $(KUBE_VERSION) -f config/gatekeeper/values.yaml
	$(HELM) lint $(GATEKEEPER_CHART) --kube-version $(KUBE_VERSION) -f config/gatekeeper/values-external-data.yaml
	$(HELM) lint $(GATEKEEPER_CHART) --kube-version $(KUBE_VERSION) -f config/gatekeeper/values.yaml -f config/gatekeeper/values-all-kinds.yaml
	@# helm template of the stock chart with our values in both modes, with
	@# and without the all-kinds opt-in, checked for what keeps a cluster
	@# from locking: the exempt namespaces, the matchConditions (quota
	@# objects, Leases, Events, namespaces without a consumer label), the
	@# rules, the ignore-label check failing open (docs/install.md).
	go test -count=1 -run '^(TestStockChartRendersOurValues|TestGatekeeperValuesAreSafe|TestQuotaRulesCoverTheCountedKinds|TestNamespaceConditionSendsOnlyConsumerLabelWrites)$$' ./internal/localcluster/
	@linked=$$(go list -deps ./plugin | sed -E -n 's@^github.com/quotakeeper/quotakeeper/(internal/[^/]*|[^/]*).*@\1@p' | sort -u); \
	for p in $$linked; do case " $(GATEKEEPER_PACKAGES) " in *" $$p "*) ;; *) echo "GATEKEEPER_PACKAGES misses $$p, which the plugin links"; exit 1;; esac; done

# Every tool binary: each is built from a module of its own under hack/tools
# (none reads the main module, so they build side by side: make -j2 tools).
TOOLS := $(GOLANGCI_LINT) $(PROMTOOL) $(HELM) $(CRD_REF_DOCS) $(CODEGEN) $(IMAGES_TOOL) $(CYCLONEDX_GOMOD)
tools: $(TOOLS) ## Build the tools verify, generate and release use into bin/, keyed by version.

lint: $(GOLANGCI_LINT) ## golangci-lint with .golangci.yml's linters.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd hack/tools/images && $(GOLANGCI_LINT) run --allow-serial-runners ./...

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION) from module sources (a few minutes cold)"
	cd hack/tools/golangci-lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(CODEGEN):
	@mkdir -p $@.tmp
	cd hack/tools/code-generator && GOBIN=$(abspath $@.tmp) go install k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen
	mv $@.tmp $@

$(CRD_REF_DOCS):
	@mkdir -p $(BIN)
	@echo "building crd-ref-docs $(CRD_REF_DOCS_VERSION) from module sources (about a minute cold)"
	cd hack/tools/crd-ref-docs && go build -o $@ github.com/elastic/crd-ref-docs

$(IMAGES_TOOL): $(wildcard hack/tools/images/*.go) hack/tools/images/go.mod hack/tools/images/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/images && go build -o $@ .

$(HELM):
	@mkdir -p $(BIN)
	@echo "building helm $(HELM_VERSION) from module sources (a few minutes cold)"
	cd hack/tools/helm && go build -o $@ helm.sh/helm/v3/cmd/helm

$(CYCLONEDX_GOMOD):
	@mkdir -p $(BIN)
	@echo "building cyclonedx-gomod $(CYCLONEDX_GOMOD_VERSION) from module sources (about a minute cold)"
	cd hack/tools/cyclonedx-gomod && go build -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

$(PROMTOOL):
	@mkdir -p $(BIN)
	@echo "building promtool $(PROMTOOL_VERSION) from module sources (a few minutes cold)"
	cd hack/tools/promtool && go build -tags remove_all_sd -o $@ github.com/prometheus/prometheus/cmd/promtool

testbin: $(ASSETS)/kube-apiserver $(ASSETS)/etcd $(ASSETS)/kube-controller-manager ## Build kube-apiserver, kube-controller-manager and etcd from Go module sources (cached in bin/).

# Binaries of one module build in one go build (a grouped target): they share
# most of Kubernetes' packages, and two go builds side by side (make -j)
# would each compile them, the build cache being no lock between processes.
$(KUBE_APISERVER) $(KUBE_CONTROLLER_MANAGER) &:
	@mkdir -p $(TESTBIN)/.build
	@echo "building kube-apiserver and kube-controller-manager $(KUBE_VERSION) from module sources (about 11 minutes cold)"
	cd hack/testbin/kube-apiserver && go build -o $(TESTBIN)/.build/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
	mv $(TESTBIN)/.build/kube-apiserver $(KUBE_APISERVER)
	mv $(TESTBIN)/.build/kube-controller-manager $(KUBE_CONTROLLER_MANAGER)

$(ETCD):
	@mkdir -p $(TESTBIN)
	@echo "building etcd $(ETCD_VERSION) from module sources (about 2 minutes cold)"
	cd hack/testbin/etcd && go build -o $@ .

$(ASSETS)/kube-apiserver: $(KUBE_APISERVER)
	@mkdir -p $(ASSETS)
	ln -sf ../$(notdir $<) $@

$(ASSETS)/kube-controller-manager: $(KUBE_CONTROLLER_MANAGER)
	@mkdir -p $(ASSETS)
	ln -sf ../$(notdir $<) $@

$(ASSETS)/etcd: $(ETCD)
	@mkdir -p $(ASSETS)
	ln -sf ../$(notdir $<) $@

node-bin: $(NODE_ASSETS)/.complete ## Build what make node-e2e's node runs: kubelet, kube-proxy, kube-scheduler, containerd, ctr, CNI plugins, CoreDNS (cached in bin/node/); runc, iproute2 and iptables from Debian.

# The node's Kubernetes binaries, in one go build after the control plane's
# (order-only), whose packages they then reuse.
$(KUBELET) $(KUBE_SCHEDULER) $(KUBE_PROXY) &: | $(KUBE_APISERVER)
	@mkdir -p $(NODEBIN)/.build
	@echo "building kubelet, kube-scheduler and kube-proxy $(KUBE_VERSION) from module sources"
	cd hack/testbin/kube-apiserver && go build -o $(NODEBIN)/.build/ k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
	mv $(NODEBIN)/.build/kubelet $(KUBELET)
	mv $(NODEBIN)/.build/kube-scheduler $(KUBE_SCHEDULER)
	mv $(NODEBIN)/.build/kube-proxy $(KUBE_PROXY)

# CoreDNS with only the plugins the bed's cluster DNS uses (hack/testbin/coredns),
# static: the bed runs it as a pod, from an image the image tool wraps it in.
$(COREDNS): $(wildcard hack/testbin/coredns/*.go) hack/testbin/coredns/go.mod hack/testbin/coredns/go.sum
	@mkdir -p $(NODEBIN)
	@echo "building CoreDNS $(COREDNS_VERSION) from module sources"
	cd hack/testbin/coredns && $(STATIC) go build -trimpath -o $@ .

# Static and without btrfs, as containerd's own release builds the shim:
# the btrfs snapshotter needs cgo and btrfs headers, and the bed uses overlayfs.
$(CONTAINERD):
	@mkdir -p $@.tmp
	@echo "building containerd $(CONTAINERD_VERSION), its runc shim and ctr from module sources"
	cd hack/testbin/containerd && CGO_ENABLED=0 go build -tags no_btrfs -o $@.tmp/ \
		github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr
	mv $@.tmp $@

$(CNI_PLUGINS):
	@mkdir -p $@.tmp
	@echo "building the CNI plugins $(CNI_PLUGINS_VERSION) from module sources"
	cd hack/testbin/cni-plugins && CGO_ENABLED=0 go build -o $@.tmp/ \
		github.com/containernetworking/plugins/plugins/ipam/host-local \
		github.com/containernetworking/plugins/plugins/main/bridge \
		github.com/containernetworking/plugins/plugins/main/loopback
	mv $@.tmp $@

$(NODEBIN)/pause: $(wildcard hack/testbin/pause/*.go)
	@mkdir -p $(NODEBIN)
	$(STATIC) go build -trimpath -o $@ ./hack/testbin/pause

$(RUNC):
	apt-get update -qq && apt-get install -y --no-install-recommends runc

$(IPROUTE):
	apt-get update -qq && apt-get install -y --no-install-recommends iproute2

$(IPTABLES):
	apt-get update -qq && apt-get install -y --no-install-recommends iptables

# One directory of links, as KUBEBUILDER_ASSETS is for envtest: the test
# finds every binary of the node there (QUOTAKEEPER_NODE_ASSETS).
$(NODE_ASSETS)/.complete: $(KUBELET) $(KUBE_SCHEDULER) $(KUBE_PROXY) $(CONTAINERD) $(CNI_PLUGINS) $(COREDNS) $(NODEBIN)/pause $(RUNC) $(IPROUTE) $(IPTABLES)
	@mkdir -p $(NODE_ASSETS)
	ln -sfn $(KUBELET) $(NODE_ASSETS)/kubelet
	ln -sfn $(KUBE_SCHEDULER) $(NODE_ASSETS)/kube-scheduler
	ln -sfn $(KUBE_PROXY) $(NODE_ASSETS)/kube-proxy
	ln -sfn $(COREDNS) $(NODE_ASSETS)/coredns
	for b in containerd containerd-shim-runc-v2 ctr; do ln -sfn $(CONTAINERD)/$$b $(NODE_ASSETS)/$$b; done
	ln -sfn $(CNI_PLUGINS) $(NODE_ASSETS)/cni
	ln -sfn $(RUNC) $(NODE_ASSETS)/runc
	touch $@

# The sandbox image: registry.k8s.io/pause cannot be pulled here, so the
# image tool wraps our pause binary as it wraps the servers (user 65532).
$(NODEBIN)/images/quotakeeper-pause.tar: $(NODEBIN)/pause $(IMAGES_TOOL)
	$(IMAGES_TOOL) build --name quotakeeper-pause --binary $< --version $(KUBE_VERSION) --source $(IMAGE_SOURCE) --out $(NODEBIN)/images

# The cluster DNS's image (registry.k8s.io/coredns cannot be pulled either):
# our CoreDNS build at /manager, run as 65532.
$(NODEBIN)/images/quotakeeper-coredns.tar: $(COREDNS) $(IMAGES_TOOL)
	$(IMAGES_TOOL) build --name quotakeeper-coredns --binary $< --version $(COREDNS_VERSION) --source https://github.com/coredns/coredns --out $(NODEBIN)/images

GATEKEEPER_BIN := $(BIN)/gatekeeper

# Which Gatekeeper `make run` runs: builtins (Gatekeeper built with the
# plugin, the default) or stock (Gatekeeper's own build; quota through the
# templates' External Data twins and the manager's provider).
GATEKEEPER ?= builtins
# make e2e and make exactness run test/e2e in that mode (QUOTAKEEPER_ADMISSION),
# and make load GATEKEEPER=stock measures both modes in one report.
ifeq ($(GATEKEEPER),stock)
RUN_GATEKEEPER = $(GATEKEEPER_STOCK)
RUN_FLAGS      := --stock
E2E_ENV        := QUOTAKEEPER_ADMISSION=externalData
LOAD_MODES     = -modes builtins,externalData -stock-gatekeeper $(GATEKEEPER_STOCK)
else ifeq ($(GATEKEEPER),builtins)
RUN_GATEKEEPER = $(GATEKEEPER_BIN)
RUN_FLAGS      :=
E2E_ENV        :=
LOAD_MODES     :=
else
$(error GATEKEEPER=$(GATEKEEPER): use builtins or stock)
endif
# Capacity leases are on by default. LEASES=1: make e2e and make exactness
# take them down to the last units; LEASES=0: off (test/e2e/main_test.go).
LEASES_ENV := $(if $(LEASES),QUOTAKEEPER_CAPACITY_LEASES=$(LEASES))

gatekeeper: $(GATEKEEPER_BIN) ## Gatekeeper v3.23.1 with quotakeeper's builtins and plugin linked in.

# vendor/ is generated, never committed: the Go toolchain refuses overlays
# into the module cache, so Gatekeeper's main package is built from vendor/
# with one file of ours laid over it. vendor/ is removed afterwards: while it
# exists every go command defaults to -mod=vendor, and a go.mod change would
# then break all builds until someone re-vendored.
# GATEKEEPER_PACKAGES are our packages linked into it: the top directories of
# `go list -deps ./plugin | grep quotakeeper/quotakeeper`, the two top ones
# under internal/ (a check in verify keeps the list whole).
GATEKEEPER_PACKAGES := api $(addprefix internal/,builtinhost builtins bypass celpolicy claimpolicies counted eventnote grants ledger ledgerconv metrics podresources quantities validation version) plugin hack/gatekeeper
# GATEKEEPER_BUILD is that build less -o and the package; make release runs
# it per architecture.
GATEKEEPER_BUILD = $(STATIC) go build -trimpath -mod=vendor -tags quotakeeper_overlay -overlay $(BIN)/gatekeeper-overlay.json \
	-ldflags '$(LDFLAGS) -X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$(GATEKEEPER_VERSION)'
$(GATEKEEPER_BIN): go.mod go.sum hack/gatekeeper/overlay.sh $(shell find $(GATEKEEPER_PACKAGES) -name '*.go' 2>/dev/null)
	go mod vendor
	hack/gatekeeper/overlay.sh $(BIN) > $(BIN)/gatekeeper-overlay.json
	@# The overlaid Rego driver passes the frameworks' own tests of it and
	@# of its client, and ours (hack/gatekeeper/regodriver), before it ships.
	hack/gatekeeper/overlay.sh $(BIN) tests > $(BIN)/gatekeeper-overlay-tests.json
	go test -race -count=1 -mod=vendor -tags quotakeeper_overlay -overlay $(BIN)/gatekeeper-overlay-tests.json \
		github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego github.com/open-policy-agent/frameworks/constraint/pkg/client || { rm -rf vendor; exit 1; }
	$(GATEKEEPER_BUILD) -o $@ github.com/open-policy-agent/gatekeeper/v3 || { rm -rf vendor; exit 1; }
	rm -rf vendor

# Gatekeeper as its release builds it: `go install pkg@version` builds in
# Gatekeeper's own module (its go.mod, not ours), with nothing of ours. The
# bed's stock mode runs it (make run GATEKEEPER=stock, and test/e2e with
# QUOTAKEEPER_ADMISSION=externalData). Keyed by the version go.mod pins; about 11 minutes with a cold build cache on
# two busy cores, about a minute after `make gatekeeper` (most packages are
# shared).
GATEKEEPER_STOCK := $(BIN)/gatekeeper-stock-$(GATEKEEPER_VERSION)

gatekeeper-stock: $(GATEKEEPER_STOCK) ## Stock Gatekeeper v3.23.1, built from its own module (no plugin).

$(GATEKEEPER_STOCK):
	@mkdir -p $(BIN)/.gatekeeper-stock
	GOBIN=$(BIN)/.gatekeeper-stock $(STATIC) go install \
		-ldflags '-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$(GATEKEEPER_VERSION)' \
		github.com/open-policy-agent/gatekeeper/v3@$(GATEKEEPER_VERSION)
	mv $(BIN)/.gatekeeper-stock/gatekeeper $@
	rmdir $(BIN)/.gatekeeper-stock

# The protocol's model (model/quota.pml, docs/design/model.md) is checked
# by SPIN, a Debian package; make test checks its bounded scopes and drives
# the ledger through its traces (internal/ledger/conformance_test.go).
SPIN := /usr/bin/spin
$(SPIN):
	@if [ "$$(id -u)" != 0 ]; then echo "the model check needs SPIN, a Debian package: sudo apt-get install spin" >&2; exit 1; fi
	apt-get update -qq && apt-get install -y --no-install-recommends spin

model: $(SPIN) ## Check the protocol's model exhaustively in every scope with SPIN, and that it catches each seeded bug (minutes; a few GiB). make test checks the bounded scopes.
	hack/model/check.sh full

unit: ## Unit tests only (no control plane).
	go test $(GO_TEST_FLAGS) -short ./...
	cd api && go test $(GO_TEST_FLAGS) -short ./...

# The test tiers (docs/operations.md, "The test loop"), as Kueue and Cluster
# API split theirs: make test is the README's command, what a developer runs
# and answers in minutes; the suites that each start a whole local cluster
# and run for many minutes are targets of their own, and .ci/run runs every
# tier.
#
# E2E_TIER: the packages whose every test starts Gatekeeper replicas and the
# manager on a local cluster of their own (test/e2e, the fault suite, the
# lockout suites) or a real node (test/node). make test runs the rest, and of
# test/e2e only E2E_SMOKE, once in each admission mode.
E2E_TIER  := /test/(e2e|faults|lockout|node)(/|$$)
# The smoke: what a user does first, admitted and denied through Gatekeeper in
# each mode: an Entity quota on one namespace, one shared across namespaces,
# a ClaimCreationPolicy, an owning service's Allocation claims.
E2E_SMOKE := ^(TestEntityQuota|TestSharedQuotaAcrossNamespaces|TestClaimCreationPolicyAdmitsUpToTheGrant|TestAllocationClaims)$$
# The end-to-end suites test processes the test binary only drives: the
# race detector is the point of the unit and envtest suites, where our code
# runs in the test binary, not here (and it would slow the driver that
# measures latencies and races creates against the limit).
# -parallel: the suite's independent tests (t.Parallel) mostly wait on the
# cluster (a count folded, a reservation expired), so more of them run at
# once than there are cores. -mod=readonly: these suites run beside other
# stages (.ci/run), and a go command started while make gatekeeper or make
# release has vendor/ written would otherwise build from it.
E2E_TEST_FLAGS ?= -count=1 -timeout 30m -parallel 6 -mod=readonly
# E2E_SKIP: tests make test-e2e leaves out (.ci/run: the smoke, which make
# test ran already in both modes).
E2E_SKIP ?=
E2E_RUN = $(if $(E2E_SKIP),-skip '$(E2E_SKIP)')

test: testbin gatekeeper gatekeeper-stock manager quotactl kubectl-quota $(HELM) $(SPIN) $(PROMTOOL) ## The README's test command: Rego tests, template suites, the protocol's model in its bounded scopes, every package's unit and envtest suites with the race detector (fuzz seed corpora and the ledger's conformance to the model included), and the end-to-end smoke in both admission modes. The tiers after it: test-e2e, faults, fuzz, model, exactness, node-e2e; .ci/run runs them all.
	$(QUOTACTL) opa test --quota rego/testdata/quota.yaml rego/
	hack/model/check.sh bounded
	$(QUOTACTL) verify templates/
	$(PROMTOOL) test rules config/prometheus/rules_test.yaml
	cd hack/tools/images && go test -count=1 $(if $(V),-v) ./...
	QUOTAKEEPER_REQUIRE_SPIN=1 go test $(GO_TEST_FLAGS) $$(go list ./... | grep -vE '$(E2E_TIER)')
	cd api && go test $(GO_TEST_FLAGS) ./...
	go test $(E2E_TEST_FLAGS) -v -run '$(E2E_SMOKE)' ./test/e2e/
	QUOTAKEEPER_ADMISSION=externalData go test $(E2E_TEST_FLAGS) -v -run '$(E2E_SMOKE)' ./test/e2e/

test-e2e: test-e2e-builtins test-e2e-stock test-e2e-leases ## The end-to-end tier: test/e2e in both admission modes with the lockout suites, the exactness harness and the creators at the limit again with capacity leases taken to the last create (make -j3 -O test-e2e: the three side by side; they mostly wait on their clusters).

# The end-to-end test binaries, compiled once before the runs that go side
# by side (each would compile them).
e2e-bins: testbin gatekeeper gatekeeper-stock manager $(HELM)
	go test -c -mod=readonly -o $(BIN)/e2e/ ./test/e2e/ ./test/lockout/... ./test/faults/

test-e2e-builtins: e2e-bins ## test/e2e on Gatekeeper built with the plugin, and the lockout suites of both modes.
	go test $(E2E_TEST_FLAGS) -v $(E2E_RUN) ./test/e2e/ ./test/lockout/...

test-e2e-stock: e2e-bins ## test/e2e on stock Gatekeeper with the templates' External Data twins (test/e2e/main_test.go).
	QUOTAKEEPER_ADMISSION=externalData go test $(E2E_TEST_FLAGS) -v $(E2E_RUN) ./test/e2e/

# The exactness harness and the concurrent creators at the limit once more
# with capacity leases on, taken down to one create's worth, a Gatekeeper
# replica killed while it holds them (make exactness LEASES=1 runs the
# harness long).
test-e2e-leases: e2e-bins ## The exactness harness and the creators at the limit with capacity leases taken to the last create.
	QUOTAKEEPER_CAPACITY_LEASES=1 go test $(E2E_TEST_FLAGS) -v -run '^(TestExactnessUnderRandomTenantActions|TestConcurrentCreatorsAcrossReplicas)$$' ./test/e2e/

# Go fuzz targets, package:target. Their seed corpora (testdata/fuzz/<target>/)
# also run as ordinary tests in every go test; `make fuzz` mutates them for
# FUZZTIME each (.ci/run: 2,000 inputs each). A failure
# leaves the input that found it in the package's testdata/fuzz/<target>/:
# fix the bug and commit that file, a regression seed from then on.
FUZZ_TARGETS := internal/builtins:FuzzDecodeClaim internal/builtins:FuzzDecodeQuery internal/builtins:FuzzQuantity \
	internal/celpolicy:FuzzSplitTemplate internal/validation:FuzzValidateGrant internal/validation:FuzzValidateClaim \
	internal/validation:FuzzValidateRegistration internal/webhooks:FuzzPolicyValidators \
	internal/webhooks:FuzzValidateBypassSpec
FUZZTIME      ?= 10s

fuzz: ## Run each fuzz target for FUZZTIME (default 10s; longer: make fuzz FUZZTIME=10m).
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn in ./$$pkg/ for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg/; \
	done

e2e: testbin gatekeeper $(if $(E2E_ENV),$(GATEKEEPER_STOCK)) manager $(HELM) ## End-to-end tests only: Gatekeeper replicas, the manager and a real control plane (GATEKEEPER=stock: on stock Gatekeeper, External Data).
	$(E2E_ENV) $(LEASES_ENV) go test $(E2E_TEST_FLAGS) -v ./test/e2e/

faults: testbin gatekeeper manager $(HELM) ## The fault suite: kube-apiserver, etcd, the manager and a Gatekeeper replica failing under load (docs/operations.md#faults), on a cluster of its own.
	go test $(E2E_TEST_FLAGS) -v ./test/faults/

# A real node joined to the bed's control plane (test/node): containerd with
# our images imported, kubelet, kube-scheduler; the test runs the manager's
# image in a pod and checks what a cluster would (docs/operations.md#the-real-node-test-bed).
# Not part of make test: it changes the host's network (a bridge, an address
# on lo) and needs root.
# NODE_RELEASE: a release directory (make release; .ci/run passes
# _output/release after make release-test): the node then imports the
# release's linux images of this machine's architecture from its OCI layouts
# and installs its chart package, instead of make images' tarballs and
# charts/quotakeeper.
NODE_RELEASE ?=
NODE_INFRA_IMAGES := $(NODEBIN)/images/quotakeeper-pause.tar $(NODEBIN)/images/quotakeeper-coredns.tar $(NODEBIN)/images/gatekeeper-stock.tar
node-e2e: node-bin $(if $(NODE_RELEASE),,images) $(NODE_INFRA_IMAGES) ## A kubelet, kube-proxy, CoreDNS, containerd and our images on this machine, joined to a local control plane; runs test/node in both admission modes (root; NODE_RELEASE=_output/release: the release's images and chart).
	QUOTAKEEPER_NODE_ASSETS=$(NODE_ASSETS) QUOTAKEEPER_NODE_IMAGES=$(IMAGE_OUT) QUOTAKEEPER_NODE_PAUSE=$(NODEBIN)/images/quotakeeper-pause.tar \
		QUOTAKEEPER_NODE_COREDNS=$(NODEBIN)/images/quotakeeper-coredns.tar QUOTAKEEPER_NODE_GATEKEEPER_STOCK=$(NODEBIN)/images/gatekeeper-stock.tar \
		QUOTAKEEPER_NODE_RELEASE=$(if $(NODE_RELEASE),$(abspath $(NODE_RELEASE))) \
		go test -count=1 -timeout 30m -v ./test/node/

# Stock Gatekeeper's image for the External Data mode: openpolicyagent/gatekeeper
# cannot be pulled here, so the image tool wraps the stock build (make
# gatekeeper-stock, the release's own module sources) as Gatekeeper's
# Dockerfile lays its image out: /manager, user 65532.
$(NODEBIN)/images/gatekeeper-stock.tar: $(GATEKEEPER_STOCK) $(IMAGES_TOOL)
	$(IMAGES_TOOL) build --name gatekeeper-stock --binary $< --version $(GATEKEEPER_VERSION) --source https://github.com/open-policy-agent/gatekeeper --out $(NODEBIN)/images

# The exactness harness (test/e2e/harness_test.go): randomized tenant and
# platform actions of every kind that changes what an object counts (create,
# grow and shrink with and without generation, scale, label in and out of
# scope, relabel a namespace, delete, orphaning delete, constraint and policy
# edits, claim-policy updates) against four consumers, checked against an
# independent count of the live objects. make test runs 600 actions with a
# seed from the clock; this
# runs EXACTNESS_ACTIONS with EXACTNESS_SEED (0: from the clock), printing
# the seed to replay, the actions taken and the violations found.
EXACTNESS_ACTIONS ?= 2000
EXACTNESS_SEED    ?= 0

exactness: testbin gatekeeper $(if $(E2E_ENV),$(GATEKEEPER_STOCK)) manager $(HELM) ## Long exactness run: make exactness EXACTNESS_ACTIONS=2000 EXACTNESS_SEED=42 (GATEKEEPER=stock: on stock Gatekeeper; LEASES=1: capacity leases on); not part of test.
	$(E2E_ENV) $(LEASES_ENV) go test -count=1 -timeout 60m -v -run '^TestExactnessUnderRandomTenantActions$$' ./test/e2e/ \
		-args -exactness.actions=$(EXACTNESS_ACTIONS) -exactness.seed=$(EXACTNESS_SEED)

# Benchmarks that talk to an apiserver run a fixed count: their b.N would
# otherwise grow until each takes a second of a write-bound loop.
KUBE_BENCHTIME ?= 300x

bench: testbin ## Benchmarks and load figures (ratios against baselines measured in the same run).
	go test -run '^$$' -bench . -benchmem ./internal/ledger/ ./rego/
	go test -run '^$$' -bench . -benchtime $(KUBE_BENCHTIME) ./internal/ledger/kubestore/

MANAGER := $(BIN)/quotakeeper-manager

# The server images, built without a container runtime (docs/operations.md#images):
# _output/images/<name>/ (an OCI image layout) and _output/images/<name>.tar
# (docker load, crane push, skopeo copy docker-archive:), tagged <name>:$(VERSION).
# IMAGE_BASE: a local OCI layout of gcr.io/distroless/static:nonroot to build
# on; empty, the tool writes the few files a static binary needs of it.
IMAGE_OUT    := $(CURDIR)/_output/images
IMAGE_SOURCE ?= https://github.com/quotakeeper/quotakeeper
IMAGE_BASE   ?=
IMAGE_BUILD  := $(IMAGES_TOOL) build --version $(VERSION) --source $(IMAGE_SOURCE) --out $(IMAGE_OUT) $(if $(IMAGE_BASE),--base $(IMAGE_BASE))
IMAGE_VERIFY := $(IMAGES_TOOL) verify --version $(VERSION) --dir $(IMAGE_OUT)

images: gatekeeper manager $(IMAGES_TOOL) ## The server images gatekeeper-quotakeeper and quotakeeper-manager in _output/images/, built and checked.
	$(IMAGE_BUILD) --name gatekeeper-quotakeeper --binary $(GATEKEEPER_BIN)
	$(IMAGE_BUILD) --name quotakeeper-manager --binary $(MANAGER)
	$(IMAGE_VERIFY) --name gatekeeper-quotakeeper --binary $(GATEKEEPER_BIN)
	$(IMAGE_VERIFY) --name quotakeeper-manager --binary $(MANAGER)

# A release (docs/operations.md#releases): every artifact under
# _output/release/ for VERSION, which must be semver (vMAJOR.MINOR.PATCH,
# optionally -prerelease): the images for RELEASE_IMAGE_PLATFORMS as OCI
# layouts, the chart packaged, the CRDs as one file, kubectl-quota and
# quotactl for RELEASE_CLI_PLATFORMS as tar.gz archives with SHA256SUMS, a
# CycloneDX SBOM per image platform and binary, the krew manifest and the
# release notes (CHANGELOG.md). Binaries are built with -trimpath, so the
# same commit and Go release give the same bytes and image digests.
# hack/release/release.sh does the work; this target gives it the tools
# and flags. Cold, about 22 minutes of CPU (two Gatekeeper builds, eight
# CLI builds); under 3 minutes with a warm build cache.
RELEASE_DIR             ?= $(CURDIR)/_output/release
RELEASE_BUILD_DIR       := $(CURDIR)/_output/release-build
RELEASE_IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_CLI_PLATFORMS   ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# Where the release's files are downloaded from (the krew manifest's URIs).
RELEASE_URL             ?= $(IMAGE_SOURCE)/releases/download/$(VERSION)
# RELEASE_CROSS_GOCACHE: a build cache of its own for the builds of other
# platforms than this machine's, which no other target reuses: about 5 GiB
# cold. .ci/run passes a directory it removes after the release check, so a
# cold run's disk stays within what a fresh machine has; empty, the usual
# cache.
RELEASE_CROSS_GOCACHE   ?=
HOST_PLATFORM            = $(shell go env GOHOSTOS)/$(shell go env GOHOSTARCH)
SOURCE_DATE_EPOCH       ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH

RELEASE_ENV = VERSION='$(VERSION)' GATEKEEPER_VERSION='$(GATEKEEPER_VERSION)' LDFLAGS='$(LDFLAGS)' \
	RELEASE_DIR='$(RELEASE_DIR)' BUILD_DIR='$(RELEASE_BUILD_DIR)' RELEASE_URL='$(RELEASE_URL)' \
	IMAGE_PLATFORMS='$(RELEASE_IMAGE_PLATFORMS)' CLI_PLATFORMS='$(RELEASE_CLI_PLATFORMS)' \
	IMAGES_TOOL='$(IMAGES_TOOL)' IMAGE_SOURCE='$(IMAGE_SOURCE)' IMAGE_BASE='$(IMAGE_BASE)' \
	HELM='$(HELM)' CYCLONEDX_GOMOD='$(CYCLONEDX_GOMOD)' \
	HOST_PLATFORM='$(HOST_PLATFORM)' CROSS_GOCACHE='$(RELEASE_CROSS_GOCACHE)'

release: $(IMAGES_TOOL) $(HELM) $(CYCLONEDX_GOMOD) ## Every release artifact under _output/release/ (make release VERSION=v0.1.0): images, chart, CRDs, CLI archives, SBOMs, krew manifest, notes.
	$(RELEASE_ENV) CHECK_ONLY=1 hack/release/release.sh
	go mod vendor
	hack/gatekeeper/overlay.sh $(BIN) > $(BIN)/gatekeeper-overlay.json
	@set -e; for p in $(RELEASE_IMAGE_PLATFORMS); do \
		echo "building gatekeeper for $$p"; \
		cache=$$(go env GOCACHE); [ "$$p" = $(HOST_PLATFORM) ] || cache=$(or $(RELEASE_CROSS_GOCACHE),$$cache); \
		GOCACHE=$$cache GOOS=$${p%/*} GOARCH=$${p#*/} $(GATEKEEPER_BUILD) -buildvcs=false -o $(RELEASE_BUILD_DIR)/$$p/gatekeeper github.com/open-policy-agent/gatekeeper/v3 || { rm -rf vendor; exit 1; }; \
	done
	rm -rf vendor
	$(RELEASE_ENV) hack/release/release.sh

# The release check (hack/tools/images/release_test.go) of a release built
# for RELEASE_TEST_VERSION: not in `make test`, whose budget two Gatekeeper
# cross-builds would break; .ci/run runs it after make test.
RELEASE_TEST_VERSION ?= v0.0.0-ci
release-test: ## make release for RELEASE_TEST_VERSION, then check every artifact (hack/tools/images/release_test.go).
	$(MAKE) release VERSION=$(RELEASE_TEST_VERSION)
	cd hack/tools/images && go test -count=1 -run '^TestRelease' -v . -args -release.dir=$(RELEASE_DIR) -release.version=$(RELEASE_TEST_VERSION) -release.url=$(IMAGE_SOURCE)/releases/download/$(RELEASE_TEST_VERSION)

# Our binaries are files, remade when a Go file of the module, go.mod or the
# version they carry changes: make runs side by side (.ci/run) then never
# relink a binary another one's cluster is running.
OUR_GO_SOURCES := $(shell find api cmd internal rego -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum
VERSION_STAMP  := $(BIN)/.version-$(subst /,-,$(VERSION))
$(VERSION_STAMP):
	@mkdir -p $(BIN)
	@rm -f $(BIN)/.version-*
	@touch $@

manager: $(MANAGER) ## The quotakeeper manager (controllers and webhooks) as bin/quotakeeper-manager.
$(MANAGER): $(OUR_GO_SOURCES) $(VERSION_STAMP)
	$(STATIC) go build $(GO_BUILD_FLAGS) -o $@ ./cmd/quotakeeper-manager

quotactl: $(BIN)/quotactl ## The policy authors' offline tool as bin/quotactl.
$(BIN)/quotactl: $(OUR_GO_SOURCES) $(VERSION_STAMP)
	$(STATIC) go build $(GO_BUILD_FLAGS) -o $@ ./cmd/quotactl

kubectl-quota: $(BIN)/kubectl-quota ## The kubectl plugin (`kubectl quota usage`, `kubectl quota explain`) as bin/kubectl-quota: put it on PATH.
$(BIN)/kubectl-quota: $(OUR_GO_SOURCES) $(VERSION_STAMP)
	$(STATIC) go build $(GO_BUILD_FLAGS) -o $@ ./cmd/kubectl-quota

run: testbin $(RUN_GATEKEEPER) manager $(HELM) ## The main job: a local control plane with Gatekeeper, the plugin and examples (GATEKEEPER=stock: stock Gatekeeper, External Data).
	go run $(GO_BUILD_FLAGS) ./cmd/quotakeeper-local --gatekeeper $(RUN_GATEKEEPER) --manager $(MANAGER) $(RUN_FLAGS)

# Flags for cmd/quotakeeper-load, e.g. a quick run:
#   make load LOAD_FLAGS='-replicas 1 -namespaces 10 -creates 5 -creators 10 -prefill 200'
LOAD_FLAGS ?=

load: testbin gatekeeper $(if $(LOAD_MODES),$(GATEKEEPER_STOCK)) manager $(HELM) ## Load run (issue 10): creates through phases a-f, h and v on a local cluster, per Gatekeeper replica count (GATEKEEPER=stock: both admission modes, (c) side by side); not part of test.
	go run $(GO_BUILD_FLAGS) ./cmd/quotakeeper-load --gatekeeper $(GATEKEEPER_BIN) --manager $(MANAGER) $(LOAD_MODES) $(LOAD_FLAGS)

print-%: ## Print a variable: make -s print-E2E_SMOKE.
	@echo '$($*)'

clean: ## Remove build outputs (keeps the cached test binaries).
	rm -rf vendor _output
