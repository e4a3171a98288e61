# Entry points the README names. Each installs what it needs first (scripts/setup.sh).
CARGO ?= cargo
DEMO_DIR ?= demo-results

.PHONY: setup build demo test lint bench clean

setup:
	bash scripts/setup.sh runtime

build: setup
	$(CARGO) build --release --locked

## The main job: every built-in workload under every installed allocator, results in $(DEMO_DIR)/.
demo: build
	./target/release/alloclens demo -o $(DEMO_DIR) --force

## Every check CI runs: formatting, clippy with warnings denied, then the whole test suite.
test:
	bash scripts/setup.sh test
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked

## Benchmarks (bench/README.md): print ratios measured side by side in one run.
bench:
	bash scripts/setup.sh bench
	bash bench/run-all.sh

clean:
	$(CARGO) clean
