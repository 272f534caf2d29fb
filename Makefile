# mlx5sim: the two commands of the README, and the benchmarks.
#   make run    the conformance suite on the simulator, every shipped profile, as a table
#   make test   everything CI checks
#   make bench  the criterion benchmarks

CARGO ?= cargo

.PHONY: run test bench lint clean

run:
	$(CARGO) run --release --quiet -p mlx5-conformance -- run --backend sim --profile all --format table

test: lint
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	$(CARGO) bench -p mlx5-sim

clean:
	$(CARGO) clean
