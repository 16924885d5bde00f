# Blanket: private telemetry in the shuffle model.
# `make demo` and `make test` are the first two commands for a new user.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         := bin
OUT         := demo-out

# Builds leave the checkout's directory out of the binaries (-trimpath), so
# the build cache keys do not depend on where the clone lives: a second
# clone reuses every package the first compiled instead of recompiling the
# module (about 70 s of CPU for make test's race builds on 2 cores). The
# go commands the tests run themselves (internal/testbuild) inherit it.
export GOFLAGS := -trimpath $(GOFLAGS)

.PHONY: all build deps test race test-short audit bench lint fmt demo demo-replicas generate check-generate clean loadtest

all: build

build: ## build the CLI into bin/
	$(GO) build -o $(BIN)/blanket ./cmd/blanket

# make test runs every test without the race detector, and make race runs
# them again under it (CI runs both). On 2 cores, both in one make test
# took 7 minutes: the race run costs about 450 s of CPU, the same tests
# uninstrumented about 170 s, and make test was over its 5 minutes.
#
# The accountant is pure math: the race detector gains nothing there and
# makes it 5 to 10 times slower, so make race leaves it out, and the
# packages that call it (sdk/plan/accounting, collector, cmd/blanket, examples/fleet)
# run under -race with the accountant and gonum compiled uninstrumented
# (-race=false for those packages only: their memory accesses are not
# tracked, everything else is, and synchronisation through channels and
# package sync is still seen). The accountant's shared state (the twiddle
# cache and parallelMap) runs fully instrumented in its own TestConcurrent
# tests, in make test (the uninstrumented run skips them). sync/atomic inside an
# uninstrumented package compiles to plain instructions the detector cannot
# see (false reports in its callers), so the accountant must not use it:
# the first line of test checks that (gonum does not use it either). The
# same goes for Google's differential-privacy library (plugins/laplace
# samples with it; it locks with package sync only, no sync/atomic): its
# sampler is 10 times slower instrumented, and the conformance kit draws
# hundreds of thousands of samples. And for the standard library's math,
# math/bits and math/cmplx (functions of their arguments' values, no state
# shared between calls, no sync/atomic), which the uninstrumented
# accountant calls in its inner loops: instrumented, they made the
# calibrations in sdk/plan's and cmd/blanket's tests a third slower.
# Not for modernc.org's SQLite and libc, though it would halve the time of
# the tests that open a store: with them uninstrumented, the race run twice
# reported races on encoding/json's type cache between goroutines that
# never touch SQLite (a lost happens-before edge we could not explain), so
# they stay instrumented.
ACCOUNTANT := github.com/blanket-dp/blanket/accountant
# go test's own vet pass is off: make lint runs go vet on every package
# (audit files included), and the pass costs about 9 s of CPU here.
GOTEST     := $(GO) test -vet=off -timeout 30m -count=1
OTHERS      = $$($(GO) list ./... | grep -vx '$(ACCOUNTANT)')
NORACE     := -gcflags='$(ACCOUNTANT)=-race=false' -gcflags='gonum.org/v1/gonum/...=-race=false' -gcflags='github.com/google/differential-privacy/go/v3/...=-race=false' \
              -gcflags='math=-race=false' -gcflags='math/bits=-race=false' -gcflags='math/cmplx=-race=false'

deps: ## install the Debian packages the tests need when missing (chromium; needs root)
	@bash tools/deps.sh

# The tests allocate fast (the accountant's lattices, SQLite under -race):
# collecting a quarter as often cuts make test's CPU by about a tenth, for
# a few hundred MB more per test process.
# A test that misses PostgreSQL or Chromium fails here (make deps installs
# them); a plain go test skips it, naming what is missing.
test race audit: export BLANKET_TEST_REQUIRE = 1
test race: export GOGC = 400
test race: deps
# The test processes share the binaries they run (the CLI, plugins)
# through one directory per run (internal/testbuild: BLANKET_TESTBUILD_DIR),
# instead of each linking its own.
# make test's four go test runs go at once, the others with 4 packages
# at a time: many packages wait (for subprocesses, periods, PostgreSQL),
# so on 2 cores 4 keep them busy. The accountant's tests, one core each
# and the last to finish, run in two halves (the review tests, the rest)
# so that both cores work once the others are done. All four run even if
# one fails.
test: ## run every test (the accountant's concurrent ones under the race detector; make race runs the rest under it)
	@if grep -l '"sync/atomic"' $$(ls accountant/*.go | grep -v '_test\.go$$'); then echo "make test: the accountant uses sync/atomic, which -race=false hides from the race detector (see the Makefile)"; exit 1; fi
	d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; export BLANKET_TESTBUILD_DIR=$$d; \
	$(GOTEST) -run '^TestReview' $(ACCOUNTANT) & a=$$!; \
	$(GOTEST) -skip '^(TestConcurrent|TestReview)' $(ACCOUNTANT) & c=$$!; \
	$(GOTEST) -race -run '^TestConcurrent' $(ACCOUNTANT) & b=$$!; \
	$(GOTEST) -p 4 $(OTHERS); s3=$$?; \
	wait $$a; s1=$$?; wait $$b; s2=$$?; wait $$c; s4=$$?; \
	exit $$((s1 | s2 | s3 | s4))

race: ## every test but the pure-math accountant's under the race detector (CI runs it after make test)
	d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; export BLANKET_TESTBUILD_DIR=$$d; \
	$(GOTEST) -race $(NORACE) -p 4 $(OTHERS)

# The deep grids live in *_audit_test.go files (build tag audit), next to
# the tests that keep a representative case of each in make test; audit
# runs exactly the tests those files define. CI runs it after make test.
AUDIT_FILES = $(shell find . -name '*_audit_test.go' -not -path './.git/*')
AUDIT_TESTS = $(shell grep -ho '^func Test[A-Za-z0-9_]*' $(AUDIT_FILES) | cut -c6- | paste -sd'|' -)

# The shuffler's and the collector's whole suites also run with every
# fixture on PostgreSQL (BLANKET_TEST_STORE=postgres, internal/servertest):
# make test runs them on SQLite, and their store tests on both.
STORE_PKGS := ./collector/ ./collector/shuffler/

audit: deps
audit: ## the deep audit grids (*_audit_test.go, build tag audit), and the store suites on PostgreSQL; CI runs them after make test
	$(GO) test -tags audit -timeout 60m -count=1 -run '^($(AUDIT_TESTS))$$' $(sort $(dir $(AUDIT_FILES)))
	BLANKET_TEST_STORE=postgres GOGC=400 $(GO) test -race $(NORACE) -timeout 30m -count=1 $(STORE_PKGS)

test-short: ## fast tests only
	$(GO) test -short -count=1 ./...

bench: ## benchmarks (accountant, plugins, admission tokens); numbers go in the closing notes
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

lint: ## gofmt, go vet, staticcheck, on the audit files too (CI runs it)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags audit ./...
	$(GO) run $(STATICCHECK) -tags audit ./...

fmt:
	gofmt -w .

# Generated protobuf/gRPC code is committed, so build and test need neither
# protoc nor network. `make generate` reproduces it byte for byte with Debian's
# protoc 3.21.12 (apt-get install -y protobuf-compiler libprotobuf-dev) and
# the protoc-gen-go / protoc-gen-go-grpc versions pinned in tools/go.mod.
PROTOC         ?= protoc
PROTOC_VERSION := libprotoc 3.21.12
PROTO_DIR      := sdk/proto
PROTO_FILES    := $(PROTO_DIR)/blanket/randomizer/v1/randomizer.proto

generate: ## regenerate the protobuf/gRPC code, then go generate
	@v=$$($(PROTOC) --version) || exit 1; if [ "$$v" != "$(PROTOC_VERSION)" ]; then \
		echo "generate: $(PROTOC) is '$$v', want '$(PROTOC_VERSION)' (the version is written into the generated files)"; exit 1; fi
	$(PROTOC) -I $(PROTO_DIR) \
		--plugin=protoc-gen-go="$$($(GO) tool -modfile=tools/go.mod -n protoc-gen-go)" \
		--plugin=protoc-gen-go-grpc="$$($(GO) tool -modfile=tools/go.mod -n protoc-gen-go-grpc)" \
		--go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative \
		$(PROTO_FILES:$(PROTO_DIR)/%=%)
	$(GO) generate ./...

check-generate: ## fail if the committed generated code is stale (skipped without protoc)
	@if ! command -v $(PROTOC) >/dev/null 2>&1; then \
		echo "check-generate: skipped, $(PROTOC) is not installed (apt-get install -y protobuf-compiler libprotobuf-dev)"; exit 0; fi; \
	$(MAKE) --no-print-directory generate || exit 1; \
	git diff --exit-code -- $(PROTO_DIR) || { echo "check-generate: generated code is stale; run make generate and commit"; exit 1; }; \
	untracked=$$(git ls-files --others --exclude-standard -- $(PROTO_DIR)); \
	if [ -n "$$untracked" ]; then echo "check-generate: files under $(PROTO_DIR) not committed:"; echo "$$untracked"; exit 1; fi; \
	echo "check-generate: generated code is up to date"

# The end-to-end demo: `blanket serve` (shuffler and collector on one free
# loopback port, a fresh data dir, examples/plan.yaml calibrated at start)
# and examples/fleet, 100,000 simulated app instances reporting through the
# SDK (sdk/client); it prints every estimate next to the truth and exits
# with the fleet's status. FLEET_FLAGS passes flags on (e.g. -n 20000);
# The demo sends the plan's metrics jointly, with admission on;
# TRAVEL=separate (the plan file's own) or TRAVEL=parallel runs the same
# plan with that travel mode.
FLEET_FLAGS ?=
TRAVEL ?=
demo: build
	$(GO) build -o $(BIN)/fleet ./examples/fleet
	@TRAVEL=$(TRAVEL) bash examples/fleet/demo.sh $(BIN)/blanket $(BIN)/fleet examples/plan.yaml $(OUT) $(FLEET_FLAGS)

# The deployment kit (deploy/) run as an operator runs it, on one machine:
# PostgreSQL with deploy/postgres/roles.sql, two collectors, an issuer and
# two shufflers started from their systemd units and config files, haproxy
# in front, examples/fleet through it, one shuffler and one collector
# SIGKILLed mid-run and restarted; every report must be counted once on
# both collectors (deploy/replicas_audit_test.go, also run by make audit).
demo-replicas: deps ## the deploy kit's replicas on PostgreSQL behind haproxy, one of each role killed mid-run; prints the figures
	$(GO) test -tags audit -count=1 -timeout 15m -v -run '^TestDeployReplicas$$' ./deploy

# A million reports through real blanket processes on SQLite (one blanket
# serve) and on PostgreSQL with 1, 2 and 4 replicas per role: throughput,
# upload latency, peak RSS and CPU per process (examples/loadtest).
# LOAD_N, LOAD_CONFIGS (e.g. "sqlite pg2"), LOAD_CONNS and LOAD_PER tune it.
loadtest: build deps
	BLANKET_BIN=$(abspath $(BIN)/blanket) $(GO) test -tags loadtest -run '^TestLoad$$' -v -count=1 -timeout 3h ./examples/loadtest

clean:
	rm -rf $(BIN) $(OUT)
