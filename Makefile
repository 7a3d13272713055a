# Bindery's two set-up commands are `make run` and `make test`; everything
# they need is installed or built here, idempotently.

GO        ?= go
BIN       := $(CURDIR)/bin
# The version the programs report (the API server at /version, `bindery version`).
VERSION   ?= $(shell tools/version.sh 2>/dev/null || echo v0.0.0-unknown)
LDFLAGS   := -X github.com/bindery-dev/bindery/internal/version.version=$(VERSION)
STATICCHECK_VERSION := v0.7.0

.PHONY: help modules bench-scale all build image run test test-compose lint docs bench deps node-deps browser clean kube bin/kube-apiserver cni helm screenshots

all: build

## help: the targets, each with the first line of what it does
help:
	@sed -n 's/^## \([a-z-]*\): /  \1: /p' $(firstword $(MAKEFILE_LIST))

# What the binaries are built from: this module's files (embedded templates,
# migrations and catalogues included), not the other modules under tools/ and
# bench/, nor tests and docs. A binary is rebuilt only when one changed.
SOURCES := go.mod go.sum $(shell find . \( -path ./tools -o -path ./bench -o -path ./bin -o -path ./dist \
	-o -path ./.git -o -path ./.bindery -o -path ./deploy \) -prune -o -type f ! -name '*_test.go' ! -name '*.md' \
	! -path '*/testdata/*' -print)

## build: the bindery and bindery-cni binaries in ./bin, static and -trimpath
## (the flags `make image` compiles with, so the two share the build cache): the runtime
## starts bindery-cni for every Pod and every CLI command is a process of
## bindery, and the dynamic loader alone took about 1 ms of each bindery-cni
## start and a few of each command (nothing needs cgo)
build: $(BIN)/bindery $(BIN)/bindery-cni

$(BIN)/bindery $(BIN)/bindery-cni: export CGO_ENABLED := 0

# One line per step: the first build downloads the Go modules (once, quietly)
# and compiles every dependency, which takes minutes; later builds compile
# what changed. VERSION_DEP makes a new version (a new commit) rebuild them
# so that they report it; `make run` leaves it out: it runs the binaries as
# they are while their sources are unchanged.
VERSION_DEP ?= $(BIN)/.version
$(BIN)/bindery $(BIN)/bindery-cni: $(SOURCES) $(VERSION_DEP)
	@GOPROXY=off $(GO) list -deps ./cmd/bindery ./cmd/bindery-cni >/dev/null 2>&1 || \
		{ echo "make: downloading the Go modules (once)"; $(GO) mod download; }
	@if [ -e $@ ]; then echo "make: building bin/$(@F) (its sources changed)"; \
	else echo "make: building bin/$(@F) (a first build compiles every dependency: a few minutes)"; fi
	@$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $@ ./cmd/$(@F)

# The version the binaries were last built as, rewritten only when it
# changes: a new commit rebuilds them, so that they report it.
$(BIN)/.version: FORCE
	@mkdir -p $(BIN); echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@

FORCE:

## image: the OCI image of bindery and bindery-cni as dist/bindery.tar
## (for docker load, podman load and ctr images import; no container engine
## needed); its binaries are compiled with `make build`'s flags (static, -trimpath), so a
## warm build cache leaves only the linking (stripped) to do
image:
	@mkdir -p dist
	$(GO) run ./tools/image bindery -o dist/bindery.tar -ref $(or $(IMAGE),bindery.test/bindery:dev) -version $(VERSION)

## run: Bindery on this machine (embedded PostgreSQL unless DATABASE_URL is set)
run: deps
	@$(MAKE) -s --no-print-directory $(BIN)/bindery VERSION_DEP=
	@echo "make: starting Bindery (bin/bindery up; Ctrl-C stops it)"
	@$(BIN)/bindery up

## test: vet, the other Go modules, then every test against real PostgreSQL and a real kube-apiserver (both started by the tests)
test: deps node-deps kube cni helm browser modules
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...

## modules: check that the repository's other Go modules build
## from their own go.mod and go.sum (-mod=readonly, as a clean clone does): bench/ is built and vetted;
## the modules under tools/ only have every package of their programs loaded
## (go list -deps), for building tools/kube or Helm takes 5+ minutes
modules:
	cd bench && $(GO) build -mod=readonly ./... && $(GO) vet -mod=readonly ./...
	tools/kube/build.sh --check
	tools/cni/build.sh --check
	cd tools/codegen && $(GO) list -mod=readonly -deps tool >/dev/null
	cd tools/helm && $(GO) list -mod=readonly -deps helm.sh/helm/v4/cmd/helm >/dev/null
	cd tools/helm/v3 && $(GO) list -mod=readonly -deps helm.sh/helm/v3/cmd/helm >/dev/null
	cd tools/compose && $(GO) list -mod=readonly -deps github.com/docker/compose/v2/cmd >/dev/null

## screenshots: the web UI's pages at 1280 and 390 px, light and dark, checked with axe-core, as PNGs
## in web/testdata/screenshots (ignored by git)
screenshots: deps browser
	@rm -rf web/testdata/screenshots
	WEB_ARTIFACTS=$(CURDIR)/web/testdata/screenshots $(GO) test -count=1 -run 'TestBrowserScreens|TestBrowserReconnect' ./web/
	@echo "make: the screenshots are in web/testdata/screenshots"

## test-compose: docs/install.md's Docker Compose steps for real (not part of test)
## with Compose v2 built from the Go module proxy, the Docker engine that answers or a private one (root, dockerd), and
## PostgreSQL from Debian's packages when no registry serves postgres:17
test-compose:
	tools/compose/test.sh

## docs: the configuration table in docs/configuration.md, from the flags the commands parse
docs:
	$(GO) run ./cmd/bindery docs config --update docs/configuration.md

## lint: formatting, vet and staticcheck
lint: $(BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## bench: the performance figures (docs/benchmarks.md)
bench: deps node-deps kube build
	$(GO) test -run '^$$' -bench 'RegisterBroker|ListPlans|CreateInstances' -benchtime 1000x ./restapi/
	$(GO) test -run '^$$' -bench 'Engine1000|FailureStorm' -benchtime 1x ./controller/
	$(GO) test -run '^$$' -bench 'KubectlGet|Watch100$$' -benchtime 1x ./apiserver/
	$(GO) test -run '^$$' -bench AggregatedGet10k -benchtime 5x ./apiserver/
	$(GO) test -run '^$$' -bench 'SpecLabelSelector' -benchtime 3x ./apiserver/
	$(GO) test -run '^$$' -bench 'SpecLabelsTrigger' -benchtime 20x ./catalog/
	$(GO) test -run '^$$' -bench Allocate -benchtime 10000x ./nodeagent/deviceplugin/
	$(GO) test -run '^$$' -bench 'Restart|Removal' -benchtime 200x ./nodeagent/deviceplugin/
	$(GO) test -run '^$$' -bench 'NodeStart' -benchtime 3x ./internal/kubetest/
	$(GO) test -run '^$$' -bench 'PodStart' -benchtime 1x ./internal/kubetest/
	$(GO) test -run '^$$' -bench 'KubeletRestart' -benchtime 10x ./cmd/bindery/
	$(GO) test -run '^$$' -bench 'CSIPodStart' -benchtime 1x ./cmd/bindery/
	$(GO) test -run '^$$' -bench Cycle -benchtime 50x ./broker/postgresql/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./nodeagent/cni/
	$(GO) test -run '^$$' -bench . -benchtime 200x ./web/
	cd bench && $(GO) run ./cmd/osbbench

## bench-scale: the figures at scale (100,000 objects, 10,000 through the engine, 1,000 watchers, replicas); about 30 minutes
bench-scale: deps kube build
	$(GO) test -run '^$$' -bench Create100k -benchtime 1x -timeout 60m ./restapi/
	$(GO) test -run '^$$' -bench Export100k -benchtime 3x -timeout 60m ./restapi/
	$(GO) test -run '^$$' -bench AggregatedGet100k -benchtime 3x -timeout 60m ./apiserver/
	$(GO) test -run '^$$' -bench Watch1000 -benchtime 200x ./apiserver/
	$(GO) test -run '^$$' -bench Engine10k -benchtime 1x -timeout 60m ./controller/
	$(GO) test -run '^$$' -bench EngineReplicas -benchtime 1x ./cmd/bindery/

## kube: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kubectl v1.36.3 in ./bin
## for the Kubernetes tests (built once from the Go module proxy; rebuilt only when tools/kube/go.mod or
## go.sum change), and Service Catalog's svcat v0.3.1 (tools/svcat)
kube bin/kube-apiserver:
	tools/kube/build.sh
	tools/svcat/build.sh

## helm: Helm v4 (bin/helm) and v3 (bin/helm3) from the Go module proxy
## for the tests of the chart in deploy/helm/bindery (tools/helm; rebuilt only when its go.mod or go.sum change)
helm:
	tools/helm/build.sh

## cni: the reference CNI plugins (bridge, host-local v1.9.1) in ./bin/cni for the bindery-cni tests
cni:
	tools/cni/build.sh

## deps: PostgreSQL server binaries, needed by `run` (without DATABASE_URL) and the tests
deps:
	@if [ -n "$$DATABASE_URL" ] || command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then echo "make: installing PostgreSQL server binaries (apt-get install postgresql)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else echo "PostgreSQL server binaries are missing: run 'sudo apt-get install postgresql' or set DATABASE_URL"; exit 1; fi

# What the tests' node runs (internal/kubetest WithNode): Debian package, then
# a file it installs (any other installation of it will do). busybox-static
# is checked by package, as the dynamic busybox installs the same path.
NODE_PACKAGES := containerd:/usr/bin/containerd runc:/usr/sbin/runc \
	containernetworking-plugins:/usr/lib/cni/bridge iptables:/usr/sbin/iptables

## node-deps: containerd, runc, the CNI plugins, iptables and a static busybox, for the tests that run Pods
node-deps:
	@missing=""; for p in $(NODE_PACKAGES); do [ -e "$${p#*:}" ] || missing="$$missing $${p%%:*}"; done; \
	dpkg-query -W -f='$${db:Status-Status}' busybox-static 2>/dev/null | grep -qx installed || missing="$$missing busybox-static"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then echo "installing what the test node runs (apt-get install$$missing)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "missing for the test node:$$missing: run 'sudo apt-get install$$missing'"; exit 1; fi

## browser: Chromium, for the web UI's browser tests (not needed by `run`)
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then echo "installing Chromium for the web UI's browser tests (apt-get install chromium)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "Chromium is missing (the web UI's browser tests need it): run 'sudo apt-get install chromium'"; exit 1; fi

clean:
	rm -rf $(BIN) dist
