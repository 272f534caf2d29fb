# mlx5sim: the two commands of the README, and the benchmarks.
#   make run       the conformance suite on the simulator, every shipped profile, as a table
#   make test      everything CI checks (installs the hw backend's system packages if missing)
#   make test-sim  the simulator and the suite only, on a host without rdma-core
#   make bench     the criterion benchmarks, the paired ratios (sim/benches/paired.rs), and the
#                  network against its UDP floors (capi/benches/network.sh)
#   make traces    regenerate traces/ from the simulator
#   make fuzz      each fuzz target for FUZZ_SECONDS (cargo-fuzz, nightly; docs/fuzzing.md)
#   make fuzz-figures  each of FUZZ_TARGETS for FUZZ_RUNS executions or FUZZ_SECONDS, as rows
#                  of docs/fuzzing.md's table
#   make bench-icount  instructions per operation of each benchmark scenario, under callgrind
#                  (repeatable where wall-clock time on a shared machine is not; installs valgrind)
#   make shim      target/shim/libibverbs.so.1, libmlx5.so.1, librdmacm.so.1: C programs on the simulator
#   make test-shim the shim's tests: the ABI, C programs, ibverbs-utils, pyverbs, the hw backend
#   make rdma-core-suite  rdma-core's own Python tests on the shim, against their expectations
#                  (capi/tests/rdma_core_suite.expected; SUITE_ARGS="--update" rewrites it)
#   make mutants   cargo-mutants over the simulator's provider, kernel, device, fabric, signature and crypto
#                  code against the simulator's and the suite's tests (hours; MUTANTS_ARGS=
#                  "--shard 0/16" runs one shard; docs/measured.md: "Mutation testing")

CARGO ?= cargo
# What the hw backend (rdma-sys and the mlx5dv bindings) needs to build and run its tests.
HW_PACKAGES := libibverbs-dev librdmacm-dev libclang-dev pkg-config
# What the HTML report's test renders the page with (headless).
HTML_PACKAGES := chromium
# What bench-icount counts instructions with.
ICOUNT_PACKAGES := valgrind
# What the shim's tests run: the installed rdma-core's tools and Python bindings.
SHIM_PACKAGES := ibverbs-utils python3-pyverbs binutils
# What rdma-core's own Python tests import (python3-pyverbs ships them), and the tools of the
# traffic and RDMA CM tests: perftest, rdmacm-utils, tshark.
SUITE_PACKAGES := python3-scapy perftest rdmacm-utils tshark
# Programs of other projects the shim's tests run: libfabric's fi_info and UCX's ucx_info.
USER_PACKAGES := libfabric-bin ucx-utils libucx-dev

# A clean build gains nothing from incremental caches; they were a third of the target folder.
test test-sim test-shim: export CARGO_INCREMENTAL = 0

.PHONY: run test test-sim test-shim shim lint deps bench bench-icount clean traces fuzz fuzz-figures fuzz-tools \
	mutants rdma-core-suite links imports

run:
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile all --format table

test: deps lint
	$(CARGO) test --workspace --all-features --all-targets
	$(CARGO) test --workspace --all-features --doc
	# The C ABI over the debug build the tests just made: the same features, so cargo adds only
	# the shim's static library; the hw-featured CLI is the tests' own.
	$(CARGO) build --workspace --all-features --all-targets
	bash capi/tests/run.sh debug
	# The CLI built without the hw backend reports hw as skipped, never as passed.
	$(CARGO) test -p mlx5-conformance --test hw_cli
	# rdma-core's own tests on the shim that run.sh linked (its last line: N passed, N failed),
	# after the runner's check of itself.
	/usr/bin/python3 capi/tests/rdma_core_suite.py --selftest
	/usr/bin/python3 capi/tests/rdma_core_suite.py $(SUITE_ARGS)

test-sim:
	$(CARGO) test -p mlx5-dv -p mlx5-sim -p mlx5-trace -p mlx5-conformance --all-targets

lint: deps links imports
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-features --all-targets -- -D warnings

# Every relative link in README.md and docs/*.md names a file that exists.
links:
	python3 docs/check_links.py

# No two sibling modules of a crate use each other, and no mod.rs (after the checker's own
# test on a synthetic crate).
imports:
	python3 docs/check_imports.py --selftest
	python3 docs/check_imports.py

deps:
	@missing=""; \
	for p in $(HW_PACKAGES) $(HTML_PACKAGES) $(SHIM_PACKAGES) $(SUITE_PACKAGES) $(USER_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
	  echo "The hw backend, the HTML report's and the shim's tests need these packages:$$missing"; \
	  echo "Install them with:  sudo apt-get install -y$$missing"; \
	  echo "or test without the hw backend:  make test-sim"; \
	  exit 1; \
	fi

bench: shim
	$(CARGO) bench -p mlx5-sim
	$(CARGO) bench -p mlx5-capi
	bash capi/benches/network.sh
	$(CARGO) bench -p mlx5-conformance --bench suite

# The simulator behind the C ABI, in target/shim (README: "Your own program on the simulator").
shim: deps
	$(CARGO) build --release -p mlx5-capi
	bash capi/abi/link.sh release

test-shim: deps
	$(CARGO) build --workspace --all-features --all-targets
	bash capi/tests/run.sh debug

SUITE_ARGS ?=
# rdma-core's own Python tests (docs/rdma-core-tests.md) on a debug shim.
rdma-core-suite: deps
	$(CARGO) build -p mlx5-capi
	bash capi/abi/link.sh debug
	/usr/bin/python3 capi/tests/rdma_core_suite.py --selftest
	/usr/bin/python3 capi/tests/rdma_core_suite.py $(SUITE_ARGS)

FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 10000000
FUZZ_TARGETS ?= mailbox calls profile_toml trace_replay datagram net_rx

fuzz-tools:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal

# Each target for FUZZ_SECONDS; new inputs go to fuzz/target/corpus, the seeds in fuzz/corpus
# stay as committed; a crash stops with its input in fuzz/artifacts. `make test` replays the
# committed corpus and fuzz/regressions on stable (fuzz/bodies/tests/corpus.rs).
fuzz: fuzz-tools
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/target/corpus/$$t && \
	  (cd fuzz && cargo +nightly fuzz run $$t target/corpus/$$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1) || exit 1; \
	done

# Each of FUZZ_TARGETS, one at a time, for FUZZ_RUNS executions or FUZZ_SECONDS, from the
# committed corpus: a row of docs/fuzzing.md's table each.
fuzz-figures: fuzz-tools
	bash fuzz/figures.sh $(FUZZ_RUNS) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The simulator's traces of every case on two profiles (traces/README.md); review the diff.
# A trace that changed only in the suite's commit is kept as it is; a trace no case recorded
# (older than the stamp) is removed.
traces:
	mkdir -p target && touch target/traces.stamp && sleep 1
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile cx6dx --record traces > /dev/null
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile cx7 --record traces > /dev/null
	find traces/sim -name '*.jsonl' ! -newer target/traces.stamp -print -delete
	# A case that opens an XRC domain on a file of its own names that file's fd, which means
	# nothing in another process: its trace cannot be replayed, so none is kept.
	grep -l '"fd":[0-9]' $$(grep -l '"open_xrcd"' traces/sim/*/*.jsonl) /dev/null | grep -v /dev/null | xargs -r rm -v
bench-icount:
	@missing=""; \
	for p in $(ICOUNT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "bench-icount needs these packages:$$missing"; \
	    echo "Install them with:  sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	fi
	$(CARGO) run --release --quiet -p mlx5-sim --example icount
	$(CARGO) run --release --quiet -p mlx5-capi --example capi_icount

# What cargo-mutants mutates: .cargo/mutants.toml names the files (provider, kernel, device, fabric,
# signature, crypto) and the test packages (the simulator's and the suite's), and excludes the
# mutants shown equivalent. Scratch copies go to the system temporary directory; the report
# to mutants.out/. Proptest keeps no failures: a seed one mutant fails would otherwise judge the
# next mutants too.
MUTANTS_ARGS ?=
mutants:
	@command -v cargo-mutants >/dev/null || $(CARGO) install cargo-mutants --locked
	PROPTEST_DISABLE_FAILURE_PERSISTENCE=1 $(CARGO) mutants --timeout 600 --jobs 1 $(MUTANTS_ARGS)

clean:
	$(CARGO) clean
