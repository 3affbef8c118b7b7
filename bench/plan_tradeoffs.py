#!/usr/bin/env python3
"""The trade-offs of the `planned` policy's plans, measured with `joader simulate` (mean of seeds):

1. Horizon: fixed horizons (the scenario's `horizon`, in steps of 1 ms) against the default rule
   (plans spanning 8 cache-fulls of accesses, at most 4 s), on S2–S4 of bench/ld_table.py.
2. Late joiners: S2 as it is (jobs starting 2500 steps apart) and with every job starting at step 0.
   A job that joins cannot couple its first horizon of items with the others' plans (those were
   decided before it came, and are never re-decided), so plans gain less with staggered starts.
3. Rate-estimate noise: the same scenarios with jobs consuming batches of 16 with ±33 % jitter per
   batch (the dispatcher then measures noisier rates, and the jobs' plans drift apart), and three
   equal jittered jobs started together on a cache barely larger than their windows (the daemon's
   integration-test scenario).

    /usr/bin/python3 bench/plan_tradeoffs.py --joader build/joader [--seeds 5]   # ~3 min on 2 cores

Prints Markdown tables.
"""
import concurrent.futures
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ld_table import scenarios, simulation_args  # noqa: E402

HORIZONS = [500, 1000, 2000, 4000, 8000]


def ld(joader, tmp, sc, policy, horizon=0):
    fd, path = tempfile.mkstemp(suffix=".json", dir=tmp)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(sc, policy=policy, horizon=horizon), f)
    out = subprocess.run([joader, "simulate", "--scenario", path, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["ld_ratio"]


def cases(seed):
    """(label, scenario) with cache sizes applied: S2–S4 of the L/D table and their variants."""
    out = []
    for label, caches, sc in scenarios(seed):
        if label.startswith("S1"):
            continue
        for cache in caches:
            out.append((f"{label.split()[0]} cache {cache}", dict(sc, cache_items=cache)))
    return out


def unstaggered(sc):
    sc = copy.deepcopy(sc)
    for j in sc["jobs"]:
        j["start"] = 0
    return sc


def jittered(sc):
    sc = copy.deepcopy(sc)
    for j in sc["jobs"]:
        j.update(batch=16, prefetch=4, jitter=0.33)
    return sc


def three_jittered(seed):
    job = {"subset": {"all": True}, "batch": 16, "prefetch": 4, "speed": 16 / 12, "jitter": 1 / 3}
    return {"universe": 2000, "cache_items": 341, "epochs": 1, "seed": seed, "sampler": "dsa", "jobs": [job] * 3}


def main():
    args = simulation_args(__doc__)
    tmp = tempfile.mkdtemp(prefix="joader-plans-")
    seeds = range(1, args.seeds + 1)
    futures = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        def submit(key, sc, policy, horizon=0):
            futures.setdefault(key, []).append(pool.submit(ld, args.joader, tmp, sc, policy, horizon))

        for seed in seeds:
            for label, sc in cases(seed):
                submit(("horizon", label, "refcnt"), sc, "refcnt")
                submit(("horizon", label, "rule"), sc, "planned")
                for h in HORIZONS:
                    submit(("horizon", label, h), sc, "planned", h)
                if label.startswith("S2"):
                    for policy in ("refcnt", "planned"):
                        submit(("join", label, "staggered", policy), sc, policy)
                        submit(("join", label, "together", policy), unstaggered(sc), policy)
                for policy in ("refcnt", "planned"):
                    submit(("noise", label, policy), jittered(sc), policy)
            for policy in ("refcnt", "planned"):
                submit(("noise", "3 equal jobs, cache 341", policy), three_jittered(seed), policy)
        print(f"{sum(len(v) for v in futures.values())} simulations ...", file=sys.stderr)
        mean = {k: statistics.mean(f.result() for f in v) for k, v in futures.items()}

    labels = [label for label, _ in cases(1)]
    print(f"L/D under DSA, mean of {args.seeds} seeds. Horizon: planned at fixed horizons (ms) and by the rule.\n")
    print("| scenario | refcnt | " + " | ".join(f"{h} ms" for h in HORIZONS) + " | rule |")
    print("|---|---:|" + "---:|" * (len(HORIZONS) + 1))
    for label in labels:
        cells = [mean[("horizon", label, x)] for x in ["refcnt"] + HORIZONS + ["rule"]]
        print(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")

    print("\nLate joiners: S2 with its staggered starts and with every job starting at step 0.\n")
    print("| scenario | starts | refcnt | planned | planned gains |")
    print("|---|---|---:|---:|---:|")
    for label in labels:
        if not label.startswith("S2"):
            continue
        for starts in ("staggered", "together"):
            r, p = mean[("join", label, starts, "refcnt")], mean[("join", label, starts, "planned")]
            print(f"| {label} | {starts} | {r:.3f} | {p:.3f} | {100 * (r - p) / r:.1f} % |")

    print("\nRate-estimate noise: batches of 16 with ±33 % jitter per batch (prefetch 4).\n")
    print("| scenario | refcnt | planned | planned gains |")
    print("|---|---:|---:|---:|")
    for label in labels + ["3 equal jobs, cache 341"]:
        r, p = mean[("noise", label, "refcnt")], mean[("noise", label, "planned")]
        print(f"| {label} | {r:.3f} | {p:.3f} | {100 * (r - p) / r:.1f} % |")


if __name__ == "__main__":
    main()
