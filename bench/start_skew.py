#!/usr/bin/env python3
"""Jobs started together, a few milliseconds apart: L/D of 4 identical jobs by their start
offsets, computed by `joader simulate` (the daemon's dispatcher on a virtual clock).

    /usr/bin/python3 bench/start_skew.py --joader build/joader [--compare OTHER/joader] [--seeds 8]

The scenario is the e2e training pipeline's k = 4 run scaled to the simulator: 2000 items, batches
of 64, 0.72 items per ms per job, loads of 2.6 ms on 4 loader threads, a cache that holds what the
jobs' windows leave free (400 items; 930 for a cache that holds half the dataset). Each row is the
mean over the seeds; with --compare, a second column from another build, side by side.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

STARTS = ["0 0 0 0", "0 1 2 3", "0 3 7 30", "0 5 5 5", "0 10 20 30"]
# (jitter per batch, epochs, cache items)
SETTINGS = [(0.0, 1, 400), (0.3, 1, 400), (0.3, 3, 400), (0.1, 1, 930)]


def ld(joader, starts, jitter, epochs, cache, seed, tmp):
    scenario = {"universe": 2000, "cache_items": cache, "epochs": epochs, "seed": seed, "load_ms": 2.6, "loaders": 4,
                "jobs": [{"name": name, "subset": {"all": True}, "batch": 64, "speed": 0.72, "start": start,
                          "jitter": jitter} for name, start in zip("abcd", starts)]}
    path = os.path.join(tmp, "scenario.json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    out = subprocess.run([joader, "simulate", "--scenario", path, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["ld_ratio"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--joader", default="build/joader")
    ap.add_argument("--compare", help="another build's joader binary, shown in a second column")
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args()
    builds = [args.joader] + ([args.compare] if args.compare else [])
    for b in builds:
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not an executable joader binary (make build first)")
    header = " | ".join(builds)
    print(f"| jitter | epochs | cache | starts (ms) | L/D: {header} |")
    print("|---:|---:|---:|---|" + "---:|" * len(builds))
    with tempfile.TemporaryDirectory() as tmp:
        for jitter, epochs, cache in SETTINGS:
            for starts in STARTS:
                offsets = [int(x) for x in starts.split()]
                cells = [statistics.mean(ld(b, offsets, jitter, epochs, cache, seed, tmp)
                                         for seed in range(1, args.seeds + 1)) for b in builds]
                print(f"| {jitter} | {epochs} | {cache} | {starts} | " + " | ".join(f"{c:.3f}" for c in cells) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
