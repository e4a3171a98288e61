#!/bin/sh
# CPU cost of procmem's tree sampler: 16 processes (1 parent + 15 children holding a few MB each)
# sampled at 10 Hz for 10 s by two samplers side by side, one per PSS refresh policy
# (EverySample and the default Adaptive { max_age: 10 }), with their ratio. Target: under 2 % of one
# core. Options are passed on: --processes N --hz F --seconds S --mb M --holder self|python
# Worst case for the default policy: --mb 16 (every sample's status is cheap, but each full
# smaps_rollup read walks four times as many pages).
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --release -p procmem --example sampler_cost
exec target/release/examples/sampler_cost "$@"
