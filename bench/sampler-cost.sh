#!/bin/sh
# CPU cost of procmem's tree sampler: 16 processes (1 parent + 15 children holding a few MB each)
# sampled at 10 Hz for 10 s. Target: under 2 % of one core.
# Options are passed on: --processes N --hz F --seconds S --mb M --holder self|python
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --release -p procmem --example sampler_cost
exec target/release/examples/sampler_cost "$@"
