# Bindery's two set-up commands are `make run` and `make test`; everything
# they need is installed or built here, idempotently.

GO        ?= go
BIN       := $(CURDIR)/bin
STATICCHECK_VERSION := 2025.1.1

.PHONY: all build run test lint bench deps clean

all: build

## build: the bindery binary in ./bin
build:
	$(GO) build -o $(BIN)/bindery ./cmd/bindery

## run: Bindery on this machine (embedded PostgreSQL unless DATABASE_URL is set)
run: deps build
	$(BIN)/bindery up

## test: vet, then every test against real PostgreSQL (started by the tests)
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...

## lint: formatting, vet and staticcheck
lint: $(BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## bench: the performance figures (see README: Benchmarks)
bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./broker/
	cd bench && $(GO) run ./cmd/osbbench

## deps: PostgreSQL server binaries, needed by `run` (without DATABASE_URL) and the tests
deps:
	@if [ -n "$$DATABASE_URL" ] || command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then echo "installing PostgreSQL server binaries (apt-get install postgresql)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else echo "PostgreSQL server binaries are missing: run 'sudo apt-get install postgresql' or set DATABASE_URL"; exit 1; fi

clean:
	rm -rf $(BIN)
