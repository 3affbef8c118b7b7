#!/usr/bin/env bash
# Builds the fuzzers' seed corpora from generated inputs (no hand-made binaries are checked in):
# JPEGs and damaged JPEGs from make_images, PNG-free here; scenarios from examples/scenarios.
set -euo pipefail
build=$1 out=$2
mkdir -p "$out/prep" "$out/scenario" "$out/service"  # service: libFuzzer starts from the empty input
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/make_images" "$tmp/img" --classes 2 --per-class 3 --size 40x30 --bad truncated,zero,magic,bomb
find "$tmp/img" -name '*.jpg' -exec cp {} "$out/prep/" \;
cp examples/scenarios/*.json "$out/scenario/"
printf '{"universe": 5, "epochs": 2, "jobs": [{"subset": {"ids": [0, 1, 2]}, "speed": 0.5}, {"subset": {"range": [1, 5]}, "start": 2}]}' > "$out/scenario/tiny.json"
