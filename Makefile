# Blanket: private telemetry in the shuffle model.
# `make demo` and `make test` are the first two commands for a new user.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         := bin
OUT         := demo-out

.PHONY: all build test test-short bench lint fmt demo generate check-generate clean

all: build

build: ## build the CLI into bin/
	$(GO) build -o $(BIN)/blanket ./cmd/blanket

test: ## run every test with the race detector
	$(GO) test -race -timeout 30m -count=1 ./...

test-short: ## fast tests only
	$(GO) test -short -count=1 ./...

bench: ## benchmarks (accountant, plugins); numbers go in the closing notes
	$(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...

lint: ## gofmt, go vet, staticcheck
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

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

# Until the end-to-end pipeline lands, the demo shows the accountant: the
# central guarantee of k-RR at several batch sizes against every baseline, the
# largest local budget for a target, and a plot of eps against n.
demo: build
	@mkdir -p $(OUT)
	@echo "== central eps of 100-ary randomized response, eps0 = 4, n = 10^6, delta = 1e-6"
	$(BIN)/blanket account eps --mech krr:k=100 --eps0 4 --n 1e6 --delta 1e-6
	@echo
	@echo "== largest eps0 meeting (eps, delta) = (1, 1e-6) at n = 10^6"
	$(BIN)/blanket account calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e6
	@echo
	@echo "== a joint composition of two metrics sharing eps0 = 4"
	$(BIN)/blanket account eps --mech 'joint(krr:k=10,krr:k=20)' --eps0 4 --n 1e5 --delta 1e-6
	@echo
	@echo "== eps against n (20 points, 10^3 to 10^8) -> $(OUT)/curve.svg"
	$(BIN)/blanket account curve --mech krr:k=100 --eps0 4 --n 1e3:1e8 --points 20 --delta 1e-6 --plot $(OUT)/curve.svg > $(OUT)/curve.csv
	@echo "wrote $(OUT)/curve.csv and $(OUT)/curve.svg"

clean:
	rm -rf $(BIN) $(OUT)
