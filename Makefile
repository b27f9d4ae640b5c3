# sunk: Slurm on Kubernetes. `make help` lists the targets.
SHELL := /usr/bin/env bash
SUNK_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sunk
BIN := $(SUNK_CACHE)/bin
ENV ?= cluster
DURATION ?= 30m
export SUNK_CACHE
# hack/lib.sh's build flags, so that make's own go commands share the scripts' build cache.
export CGO_ENABLED := 0
export GOFLAGS := -buildvcs=false -trimpath -ldflags=-w

.PHONY: help build install generate slurm-conf-keys slurm-openapi lint test test-slurm-26.05 unit provision images testbed-up testbed-down demo demo-seeds-day demo-down soak bench bench-operator bench-exporter bench-scheduler

help: ## this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## compile every command into bin/
	go build ./...
	@if [ -d cmd ]; then go build -o bin/ ./cmd/...; fi
	cd scheduler && go build -o ../bin/ ./cmd/sunk-scheduler

install: build ## install the kubectl plugin (kubectl sunk) into $(PREFIX)/bin, default /usr/local/bin
	install -D -m 0755 bin/kubectl-sunk $(or $(PREFIX),/usr/local)/bin/kubectl-sunk

generate: ## regenerate generated code (CRDs, deepcopy, RBAC, REST clients and their adapters)
	hack/provision.sh codegen
	@if [ -d api ]; then $(BIN)/controller-gen object paths=./api/... && \
	  $(BIN)/controller-gen crd webhook paths=./... output:crd:artifacts:config=config/crd/bases && \
	  $(BIN)/controller-gen rbac:roleName=sunk-operator paths=./internal/controller/... output:rbac:artifacts:config=config/rbac && \
	  $(BIN)/controller-gen rbac:roleName=sunk-syncer paths=./internal/syncer/... output:rbac:artifacts:config=config/rbac/syncer; fi
	go generate ./...
	@# The sunk chart carries copies of the generated manifests (charts/sync_test.go checks them).
	rm -f charts/sunk/crds/*.yaml && cp config/crd/bases/*.yaml charts/sunk/crds/
	cp config/rbac/role.yaml charts/sunk/files/operator-role.yaml
	cp config/rbac/syncer/role.yaml charts/sunk/files/syncer-role.yaml
	cp config/webhook/manifests.yaml charts/sunk/files/webhook.yaml

slurm-conf-keys: ## regenerate the slurm.conf/cgroup.conf keys validation knows (internal/validation) from a Slurm git clone: SLURM_SRC=dir SLURM_TAG=slurm-24-11-7-1
	hack/gen-slurm-conf-keys.sh $(SLURM_SRC) $(or $(SLURM_TAG),slurm-24-11-7-1)

slurm-openapi: ## refetch Slurm's OpenAPI specs from the test bed's slurmrestd and regenerate the client
	hack/gen-slurm-openapi.sh all

lint: ## gofmt, go vet and helm lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet -tags integration,e2e ./...
	$(BIN)/helm lint --strict charts/sunk charts/slurm
	cd scheduler && go vet -tags integration ./...

unit: ## unit tests only (no processes, seconds)
	go test ./...
	cd scheduler && go test ./...

test: ## THE test command: provision, lint, unit + integration (real Slurm, apiserver) + e2e (real kubelet)
	hack/test.sh

provision: ## install host packages, build Kubernetes/helm/kwok/codegen tools, Slurm rootfs and images, and the JobSet/LWS controllers the e2e tests run
	hack/provision.sh all

images: ## build sunk's and Slurm's images offline (hack/images.sh); with REGISTRY=host[:port]/path [TAG=...] also push them there (hack/push-images.sh)
	hack/provision.sh images
	@if [ -n "$(REGISTRY)" ]; then hack/push-images.sh "$(REGISTRY)" $(TAG); fi

testbed-up: ## start an environment: ENV=api|cluster|slurm (default cluster)
	@if [ "$(ENV)" = slurm ]; then hack/env-slurm.sh up; else hack/env-kube.sh up $(ENV); fi

testbed-down: ## stop every environment, leaving nothing behind
	hack/env-kube.sh down
	hack/env-slurm.sh down
	SUNK_SLURM_VERSION=26.05 hack/env-slurm.sh down

test-slurm-26.05: ## pkg/slurm's integration tests against Slurm 26.05 (its own test bed beside 24.11's; about 2 min warm)
	SUNK_SLURM_VERSION=26.05 hack/provision.sh rootfs
	SUNK_SLURM_VERSION=26.05 hack/env-slurm.sh up
	SUNK_SLURM_VERSION=26.05 go test -tags integration -count=1 ./test/integration/slurm/

demo: ## the local cluster with real Slurm and Kubernetes, and a first job
	hack/demo.sh up

demo-seeds-day: ## on the running demo: training grows NodeSet burst, inference through sunk-scheduler preempts it, it is requeued and runs again
	hack/demo.sh seeds-day

demo-down: ## tear the demo down
	hack/demo.sh down

bench-operator: ## the operator's NodeSet controller at 5,000 nodes on real Slurm and envtest (bench: lines; SUNK_BENCH_NODES, SUNK_BENCH_PATHS=rest,watcher)
	hack/env-slurm.sh up
	go test -tags integration -count=1 -run '^$$' -bench Operator -benchtime 1x -timeout 90m ./test/integration/operator/

bench: bench-operator bench-exporter bench-scheduler ## bench-operator, bench-exporter and bench-scheduler, one after the other (bench: lines)

bench-scheduler: ## sunk-scheduler beside kube-scheduler and Slurm's floor (1,000 pods), then at 5,000 nodes and 9,000 jobs, each on a fresh Slurm test bed (bench: lines)
	hack/env-slurm.sh down; hack/env-slurm.sh up
	cd scheduler && go test -tags integration -count=1 -run '^$$' -bench ThousandPods -benchtime 1x -timeout 30m ./test/integration/
	hack/env-slurm.sh down; hack/env-slurm.sh up
	cd scheduler && go test -tags integration -count=1 -run '^$$' -bench SchedulerAtScale -benchtime 1x -timeout 30m ./test/integration/

bench-exporter: ## the Slurm exporter at 5,000 nodes and 9,000 jobs on real Slurm, and kubectl sunk's views at 5,000 nodes and 10,000 jobs (bench: lines; SUNK_BENCH_NODES, SUNK_BENCH_JOBS)
	hack/env-slurm.sh up
	go test -tags integration -count=1 -run '^$$' -bench Exporter -benchtime 1x -timeout 30m ./test/integration/exporter/
	go test -count=1 -run '^$$' -bench ViewsAtScale -benchtime 5x ./internal/kubectlsunk/

soak: ## the soak (docs/soak.md) on the demo's cluster: churn and faults for DURATION (default 30m), then a report
	DURATION=$(DURATION) test/soak/run.sh
