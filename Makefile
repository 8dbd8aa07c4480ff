# move-operator Makefile. Every tool is built from the Go module proxy at a
# pinned version into ./bin (ignored by git); nothing else is downloaded.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= move-operator:dev
GO ?= go

# Pinned tool versions.
CONTROLLER_TOOLS_VERSION ?= v0.21.0
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
CRD_REF_DOCS_VERSION ?= v0.3.0

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CRD_REF_DOCS ?= $(LOCALBIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)

# Go test flags: override to narrow a run, e.g. make test TEST_ARGS='-run TestAPI ./api/...'
# go test starts the packages' runs in the order given: the longest (each
# with a pair of local clusters of its own) come first, then every other.
TEST_ARGS ?= ./test/livecontrollers ./test/crashsweep ./test/recovery ./controllers ./...
# How many packages go test builds and runs at once (its -p; default the
# number of CPUs: on CI's 2, the long packages above held both slots while
# every other package waited). The cluster tests spend part of their time
# waiting on their clusters, so one more package runs than there are CPUs;
# six at once on two CPUs starved the clusters' webhooks past their
# timeouts. On a machine busy with other work, TEST_PARALLEL=2 keeps the
# tests' own time bounds (the crash sweep's per run) from being starved.
TEST_PARALLEL ?= 3
TEST_TIMEOUT ?= 60m
# Test files that need local clusters carry the build tag "cluster": plain
# `go test ./...` runs every other test, with nothing but Go, in minutes;
# make test (and CI) builds with the tag, so none of them is left out.
TEST_TAGS ?= cluster
TEST_LOG ?= $(LOCALBIN)/test.log

# Benchmark flags: override to narrow a run, e.g. make bench BENCH_ARGS='-n 1,10 -reps 1'.
# The run writes BENCH_OUT whole, stating the command and flags that made it.
BENCH_ARGS ?=
BENCH_OUT ?= docs/benchmarks.md
# Backup benchmark flags, e.g. make bench-backup BENCH_BACKUP_ARGS='-n 1 -rss-n 0'.
BENCH_BACKUP_ARGS ?=
BENCH_BACKUP_OUT ?= docs/benchmarks-backup.md

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests from the Go markers, and the admission policies from internal/creator.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(GO) run ./hack/admissionpolicies config/admission

.PHONY: docs
docs: $(CRD_REF_DOCS) ## Generate the API reference (docs/api-reference.md) from the Go types.
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crd-ref-docs.yaml --renderer=markdown \
		--output-path=docs/api-reference.md

.PHONY: fmt
fmt: ## Run go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet, on the tests that need clusters too.
	$(GO) vet -tags $(TEST_TAGS) ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --build-tags $(TEST_TAGS) ./...

.PHONY: verify-generated
verify-generated: ## Fail when generated code, manifests, the API reference or dist/install.yaml differ from what the sources generate.
	hack/verify-generated.sh

.PHONY: kube-binaries
kube-binaries: ## Build (once, then cached) etcd, kube-apiserver, controller-manager, scheduler and kwok; and Kubernetes 1.33's, for test/olderkubernetes.
	hack/kube-binaries.sh
	KUBE_VERSION=1.33 hack/kube-binaries.sh

# The tests run the manager binary taken out of the image make image writes
# (test/installed): what is shipped is what is tested. test/olderkubernetes
# runs Kubernetes 1.33's control plane (localcluster.BinaryDirOf).
.PHONY: test
test: test-ksm verify-generated vet image | $(LOCALBIN) ## Run every test in the module against real local clusters, the operator as installed, and test-ksm; prints each package's time at the end.
	MOVE_OPERATOR_IMAGE_DIR="$(IMAGE_DIR)" KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh | tail -1)" \
		KUBEBUILDER_ASSETS_1_33="$$(KUBE_VERSION=1.33 hack/kube-binaries.sh | tail -1)" \
		hack/test-times.sh $(TEST_LOG) $(GO) test -p $(TEST_PARALLEL) -tags $(TEST_TAGS) -timeout $(TEST_TIMEOUT) -count=1 $(TEST_ARGS)

.PHONY: test-fast
test-fast: test-ksm ## Run the tests that need no cluster (plain go test ./..., and test-ksm): nothing but Go, a few minutes.
	$(GO) test -count=1 ./...

# config/kube-state-metrics is a Go module of its own (kube-state-metrics is
# built on older Kubernetes libraries than the operator), so go test ./...
# at the root does not enter it.
.PHONY: test-ksm
test-ksm: ## Run the test of the kube-state-metrics configuration (config/kube-state-metrics) through kube-state-metrics' own code; no cluster.
	cd config/kube-state-metrics && $(GO) test -count=1 ./...

.PHONY: demo
demo: ## The pivot: a bootstrap cluster's fleet of 9 clusters (2 of CAPD's in-memory provider) moves into the management cluster it created; BACK=1 moves it back, KEEP=1 keeps both running.
	$(GO) build -o bin/demo ./test/demo
	bin/demo

.PHONY: test-crash
test-crash: ## Run the crash sweeps alone (make test runs them too): the operator stopped at every one of its writes during a move, and during a rollback.
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh | tail -1)" \
		$(GO) test -tags $(TEST_TAGS) -timeout 60m -count=1 -v -run 'TestTheMoveFinishesAfterACrashAtAnyWrite|TestARollbackFinishesAfterACrashAtAnyWrite' ./test/crashsweep/ ./test/recovery/ \
		| grep -E '^(=== RUN|--- |\s+---|ok|FAIL|PASS)|crash sweep|uninterrupted|crashed [0-9]+ times'

.PHONY: bench
bench: ## Benchmark the operator against clusterctl move and raw requests (N=10,50,100; hours on 2 cores); writes docs/benchmarks.md whole (BENCH_OUT); BENCH_ARGS narrows it.
	$(GO) build -o bin/bench ./test/bench
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh | tail -1)" bin/bench -out $(BENCH_OUT) $(BENCH_ARGS)

.PHONY: bench-backup
bench-backup: ## Benchmark backup and restore, the operator against clusterctl move --to-directory/--from-directory (N=1,30,100, then the operator's peak RSS at N=1,000); writes docs/benchmarks-backup.md whole (BENCH_BACKUP_OUT); BENCH_BACKUP_ARGS narrows it.
	$(GO) build -o bin/bench ./test/bench
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh | tail -1)" bin/bench -backup -out $(BENCH_BACKUP_OUT) $(BENCH_BACKUP_ARGS)

SAFETY_ARGS ?=

.PHONY: safety
safety: ## Move identical fleets with clusterctl and with the operator, every controller live, in scenarios where a controller acts during a move; writes docs/safety.md (SAFETY_ARGS='-only a,b' narrows it).
	$(GO) build -o bin/safety ./test/safety
	KUBEBUILDER_ASSETS="$$(hack/kube-binaries.sh | tail -1)" bin/safety -out docs/safety.md $(SAFETY_ARGS)

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/manager.
	$(GO) build -o bin/manager .

.PHONY: run
run: ## Run the manager out of cluster against the current kubeconfig.
	$(GO) run . --leader-elect=false --metrics-bind-address=:8443 --health-probe-bind-address=:8081

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine; none runs on the CI machines).
	docker build -t $(IMG) .

# make image writes one docker-save tarball per platform here, e.g.
# bin/image/move-operator-linux-arm64.tar (docker load -i, kind load image-archive).
IMAGE_DIR ?= $(LOCALBIN)/image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: image
image: ## Build the manager image without Docker: one tarball per platform (IMAGE_PLATFORMS) in bin/image, tagged IMG.
	$(GO) run ./hack/image/cmd/manager-image build -img $(IMG) -platforms $(IMAGE_PLATFORMS) -dir $(IMAGE_DIR)

.PHONY: image-push
image-push: image ## Push the images of make image to IMG as one multi-platform index (credentials from ~/.docker/config.json).
	$(GO) run ./hack/image/cmd/manager-image push -img $(IMG) -platforms $(IMAGE_PLATFORMS) -dir $(IMAGE_DIR)

.PHONY: dist
dist: manifests $(KUSTOMIZE) ## Write the installer: dist/install.yaml (CRD, RBAC and manager naming IMG) and dist/target-access.yaml (what the operator needs in a target cluster).
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default > dist/install.yaml
	{ printf '%s\n' \
		'# move-operator: what the operator needs in a TARGET cluster (a ServiceAccount, the rules of a move, the binding).' \
		'# Generated by `make dist` from config/target-access, which says why each rule is there (so does docs/access.md).' \
		'# To apply it, mint a token and write the Secret of the source in one step: manager target-access --help'; \
		$(KUSTOMIZE) build config/target-access; } > dist/target-access.yaml

.PHONY: build-installer
build-installer: dist ## Same as dist (the name kubebuilder projects use).

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): | $(LOCALBIN)
	hack/go-install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_TOOLS_VERSION)

$(KUSTOMIZE): | $(LOCALBIN)
	hack/go-install-tool.sh $@ sigs.k8s.io/kustomize/kustomize/v5 $(KUSTOMIZE_VERSION)

$(CRD_REF_DOCS): | $(LOCALBIN)
	hack/go-install-tool.sh $@ github.com/elastic/crd-ref-docs $(CRD_REF_DOCS_VERSION)

$(GOLANGCI_LINT): | $(LOCALBIN)
	hack/go-install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VERSION)
