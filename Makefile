# mlx5sim: the two commands of the README, and the benchmarks.
#   make run       the conformance suite on the simulator, every shipped profile, as a table
#   make test      everything CI checks (installs the hw backend's system packages if missing)
#   make test-sim  the simulator and the suite only, on a host without rdma-core
#   make bench     the criterion benchmarks
#   make bench-icount  instructions per operation of each benchmark scenario, under callgrind
#                  (repeatable where wall-clock time on a shared machine is not; installs valgrind)

CARGO ?= cargo
# What the hw backend (rdma-sys and the mlx5dv bindings) needs to build and run its tests.
HW_PACKAGES := libibverbs-dev librdmacm-dev libclang-dev pkg-config
# What the HTML report's test renders the page with (headless).
HTML_PACKAGES := chromium
# What bench-icount counts instructions with.
ICOUNT_PACKAGES := valgrind

.PHONY: run test test-sim lint deps bench bench-icount clean

run:
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile all --format table

test: deps lint
	$(CARGO) test --workspace --all-features --all-targets
	$(CARGO) test --workspace --all-features --doc
	# The CLI built without the hw backend reports hw as skipped, never as passed.
	$(CARGO) test -p mlx5-conformance --test hw_cli

test-sim:
	$(CARGO) test -p mlx5-dv -p mlx5-sim -p mlx5-conformance --all-targets

lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-features --all-targets -- -D warnings

deps:
	@missing=""; \
	for p in $(HW_PACKAGES) $(HTML_PACKAGES); do \
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

clean:
	$(CARGO) clean
