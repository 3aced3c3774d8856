# Maestro on AWS. `make run` starts everything locally; `make test` runs
# every test (it installs and starts PostgreSQL itself).

SHELL       := /bin/bash
GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CDK_VERSION := 2.1148.1
CDK_DIR     := infra/.cdk
CDK         := $(CDK_DIR)/node_modules/.bin/cdk
LAMBDAS     := api publisher
BUILD       := build
FUZZTIME    ?= 20s
TEST_PGDIR  ?= $(or $(TMPDIR),/tmp)/maestro-pgtest-$(shell id -u)
EMULATOR_DIR ?= $(or $(TMPDIR),/tmp)/maestro-ministack-$(shell id -u)
MINISTACK_VERSION := 1.5.33
SCHEMATHESIS_VERSION := 4.32.5
VENV        := .maestro/venv
BENCH_PGDIR ?= $(or $(TMPDIR),/tmp)/maestro-pgbench-$(shell id -u)

.PHONY: run test postgres emulator build synth bench fuzz fuzz-api lint clean

## run: the REST API, engine and trigger loop on 127.0.0.1:8080 (own PostgreSQL unless DATABASE_URL is set)
run: postgres
	$(GO) run ./cmd/maestro dev --addr 127.0.0.1:8080

## test: every test, against a real throwaway PostgreSQL and a LocalStack-compatible emulator
test: postgres emulator
	@status=0; \
	MAESTRO_TEST_PGDIR=$(TEST_PGDIR) MAESTRO_EMULATOR_DIR=$(EMULATOR_DIR) $(GO) test -race -timeout 15m ./... || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(TEST_PGDIR) || true; \
	if [ -f $(EMULATOR_DIR)/pid ]; then kill $$(cat $(EMULATOR_DIR)/pid) 2>/dev/null || true; rm -f $(EMULATOR_DIR)/pid $(EMULATOR_DIR)/port; fi; \
	exit $$status

## emulator: install ministack (a LocalStack drop-in that needs no Docker) into .maestro/venv
emulator: $(VENV)/bin/ministack

$(VENV)/bin/ministack:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check ministack==$(MINISTACK_VERSION)

## postgres: install PostgreSQL server binaries from Debian when missing
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing PostgreSQL from Debian packages"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	else echo "PostgreSQL server binaries are missing: install PostgreSQL 15+ or set DATABASE_URL" >&2; exit 1; fi

## build: engine binary and every Lambda bootstrap (linux/arm64), zipped for CDK
build:
	@mkdir -p $(BUILD)/engine $(BUILD)/lambda
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='-s -w' -o $(BUILD)/engine/maestro ./cmd/maestro
	@for fn in $(LAMBDAS); do \
		mkdir -p $(BUILD)/lambda/$$fn && \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='-s -w' -tags lambda.norpc \
			-o $(BUILD)/lambda/$$fn/bootstrap ./functions/$$fn && \
		rm -f $(BUILD)/lambda/$$fn.zip && \
		(cd $(BUILD)/lambda/$$fn && zip -q -X ../$$fn.zip bootstrap) && \
		echo "built $(BUILD)/lambda/$$fn.zip" || exit 1; \
	done

## synth: cdk synth, offline, with the pinned CDK CLI installed locally
synth: build $(CDK)
	$(CDK) synth --quiet --all

$(CDK):
	npm install --no-audit --no-fund --prefix $(CDK_DIR) aws-cdk@$(CDK_VERSION)

## bench: the hot-path benchmarks (see docs/performance.md), against a PostgreSQL with fsync and synchronous_commit on
bench: postgres
	@status=0; \
	MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 45m ./sel/... ./engine/... || status=$$?; \
	MAESTRO_BENCH_FOREACH_100K=1 MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkForeach100000$$' -benchtime 1x -count 1 -timeout 30m ./engine/flow/ || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(BENCH_PGDIR) || true; \
	exit $$status

## fuzz: each SEL fuzz target for FUZZTIME
fuzz:
	$(GO) test ./sel -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./sel -run '^$$' -fuzz '^FuzzEval$$' -fuzztime $(FUZZTIME)

## fuzz-api: fuzz every REST operation from the OpenAPI document (schemathesis); any 5xx fails
fuzz-api: postgres $(VENV)/bin/schemathesis
	bash .ci/fuzz-api

$(VENV)/bin/schemathesis: $(VENV)/bin/ministack
	$(VENV)/bin/pip install --quiet --disable-pip-version-check schemathesis==$(SCHEMATHESIS_VERSION)

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BUILD) cdk.out
