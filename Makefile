# mlx5sim: the two commands of the README, and the benchmarks.
#   make run       the conformance suite on the simulator, every shipped profile, as a table
#   make test      everything CI checks (installs the hw backend's system packages if missing)
#   make test-sim  the simulator and the suite only, on a host without rdma-core
#   make bench     the criterion benchmarks, and the paired ratios (sim/benches/paired.rs)
#   make traces    regenerate traces/ from the simulator
#   make fuzz      each fuzz target for FUZZ_SECONDS (cargo-fuzz, nightly)
#   make bench-icount  instructions per operation of each benchmark scenario, under callgrind
#                  (repeatable where wall-clock time on a shared machine is not; installs valgrind)
#   make shim      target/shim/libibverbs.so.1 and libmlx5.so.1: C programs on the simulator
#   make test-shim the shim's tests: the ABI, C programs, ibverbs-utils, pyverbs, the hw backend
#   make mutants   cargo-mutants over the simulator's provider, kernel, device and signature
#                  code against the simulator's and the suite's tests (hours; MUTANTS_ARGS=
#                  "--shard 0/16" runs one shard; README: "Mutation testing")

CARGO ?= cargo
# What the hw backend (rdma-sys and the mlx5dv bindings) needs to build and run its tests.
HW_PACKAGES := libibverbs-dev librdmacm-dev libclang-dev pkg-config
# What the HTML report's test renders the page with (headless).
HTML_PACKAGES := chromium
# What bench-icount counts instructions with.
ICOUNT_PACKAGES := valgrind
# What the shim's tests run: the installed rdma-core's tools and Python bindings.
SHIM_PACKAGES := ibverbs-utils python3-pyverbs binutils

# A clean build gains nothing from incremental caches; they were a third of the target folder.
test test-sim test-shim: export CARGO_INCREMENTAL = 0

.PHONY: run test test-sim test-shim shim lint deps bench bench-icount clean traces fuzz mutants

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

test-sim:
	$(CARGO) test -p mlx5-dv -p mlx5-sim -p mlx5-conformance --all-targets

lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-features --all-targets -- -D warnings

deps:
	@missing=""; \
	for p in $(HW_PACKAGES) $(HTML_PACKAGES) $(SHIM_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
	  echo "The hw backend and the HTML report's test need these packages:$$missing"; \
	  echo "Install them with:  sudo apt-get install -y$$missing"; \
	  echo "or test without the hw backend:  make test-sim"; \
	  exit 1; \
	fi

bench:
	$(CARGO) bench -p mlx5-sim
	$(CARGO) bench -p mlx5-capi
	$(CARGO) bench -p mlx5-conformance --bench suite

# The simulator behind the C ABI, in target/shim (README: "Your own program on the simulator").
shim: deps
	$(CARGO) build --release -p mlx5-capi
	bash capi/abi/link.sh release

test-shim: deps
	$(CARGO) build --workspace --all-features --all-targets
	bash capi/tests/run.sh debug

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := mailbox calls profile_toml trace_replay

# Each target for FUZZ_SECONDS; new inputs go to fuzz/target/corpus, the seeds in fuzz/corpus
# stay as committed; a crash stops with its input in fuzz/artifacts.
fuzz:
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/target/corpus/$$t && \
	  (cd fuzz && cargo +nightly fuzz run $$t target/corpus/$$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1) || exit 1; \
	done

# The simulator's traces of every case on two profiles (traces/README.md); review the diff.
traces:
	rm -rf traces/sim
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile cx6dx --record traces > /dev/null
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile cx7 --record traces > /dev/null
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

# What cargo-mutants mutates: .cargo/mutants.toml names the files (provider, kernel, device,
# signature) and the test packages (the simulator's and the suite's), and excludes the
# mutants shown equivalent. Scratch copies go to the system temporary directory; the report
# to mutants.out/.
MUTANTS_ARGS ?=
mutants:
	@command -v cargo-mutants >/dev/null || $(CARGO) install cargo-mutants --locked
	$(CARGO) mutants --timeout 600 --jobs 1 $(MUTANTS_ARGS)

clean:
	$(CARGO) clean
