#!/usr/bin/env python3
"""The paper's appendix experiments, reproduced with `joader simulate` (the daemon's sampler, cache
and dispatcher on a virtual clock):

1. I/O over time for four jobs that start at different moments, synchronous (lockstep: every job
   waits for the others each round) vs asynchronous (DSA): loads per step and each job's progress.
2. RefCnt vs generic cache policies: loads per policy under DSA, for several cache sizes, with
   Belady (offline, sees the future) as the floor and independent sampling + LRU (k separate
   loaders with a shared LRU cache) as the ceiling.

Both on the paper's setup: D = sample([0, 13333], 10000) per job, 4 jobs starting 2500 steps
apart, 3 epochs each (scenario S2 of docs/BENCHMARKS.md).

    /usr/bin/python3 bench/appendix.py --joader build/joader --out docs    # ~1 minute on 2 cores

Writes OUT/appendix_io.png, OUT/appendix_policies.png and OUT/appendix_results.json, and prints
the figures as Markdown.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile

POLICIES = ["refcnt", "rate", "planned", "lru", "fifo", "belady"]
CACHES = [500, 1000, 2500, 5000]
WINDOW = 250  # steps per point of the loads-over-time curve


def s2(seed, sampler="dsa", policy="refcnt", cache=1000):
    jobs = [{"name": f"job{j}", "subset": {"sample": 10000, "seed": 1000 * seed + j}, "start": 2500 * j}
            for j in range(4)]
    return {"universe": 13334, "cache_items": cache, "epochs": 3, "seed": seed, "sampler": sampler,
            "policy": policy, "jobs": jobs}


def simulate(joader, tmp, scenario, trace=False):
    name = f"{scenario['sampler']}-{scenario['policy']}-{scenario['cache_items']}-{scenario['seed']}"
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    cmd = [joader, "simulate", "--scenario", path, "--json"]
    trace_path = os.path.join(tmp, name + ".jsonl")
    if trace:
        cmd += ["--trace", trace_path]
    result = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    if trace:
        with open(trace_path) as f:
            result["trace"] = [json.loads(line) for line in f]
    return result


def io_curves(result):
    """Loads per step in windows of WINDOW steps, and each job's delivered items over time.
    A trace line is a delivery; the jobs served one item in the same round all see hit=false, but
    it was loaded once: misses count once per (step, item)."""
    loads = collections.Counter()
    seen = set()
    progress = collections.defaultdict(list)
    delivered = collections.Counter()
    for d in result["trace"]:
        if not d["hit"] and (d["t"], d["item"]) not in seen:
            seen.add((d["t"], d["item"]))
            loads[d["t"] // WINDOW] += 1
        delivered[d["job"]] += 1
        if delivered[d["job"]] % 100 == 0:
            progress[d["job"]].append((d["t"], delivered[d["job"]]))
    end = result["steps"]
    xs = [w * WINDOW for w in range(end // WINDOW + 1)]
    return xs, [loads[w] / WINDOW for w in range(len(xs))], dict(progress)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--joader", default="build/joader")
    ap.add_argument("--out", default="docs")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2, help="parallel simulations")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tmp = tempfile.mkdtemp(prefix="joader-appendix-")
    seeds = range(1, args.seeds + 1)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        io = {s: pool.submit(simulate, args.joader, tmp, s2(1, s), True) for s in ("lockstep", "dsa")}
        runs = {(sampler, policy, cache, seed): pool.submit(simulate, args.joader, tmp, s2(seed, sampler, policy, cache))
                for cache in CACHES for seed in seeds
                for sampler, policy in [("dsa", p) for p in POLICIES] + [("independent", "lru"), ("lockstep", "refcnt")]}
        print(f"{len(runs) + 2} simulations ...", file=sys.stderr)
        io = {k: f.result() for k, f in io.items()}
        runs = {k: f.result() for k, f in runs.items()}

    # Figure 1: I/O over time, synchronous vs asynchronous.
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    summary_io = {}
    for sampler, label, style in [("lockstep", "synchronous (lockstep)", "--"), ("dsa", "asynchronous (DSA)", "-")]:
        r = io[sampler]
        xs, per_step, progress = io_curves(r)
        top.plot(xs, per_step, style, label=f"{label}: {r['loads']} loads in {r['steps']} steps")
        for j, (job, points) in enumerate(sorted(progress.items())):
            bottom.plot([t for t, _ in points], [n for _, n in points], style, color=f"C{j}",
                        label=(job if sampler == "dsa" else None))
        summary_io[sampler] = {"loads": r["loads"], "steps": r["steps"], "ld_ratio": r["ld_ratio"],
                               "end_steps": [j["end_step"] for j in r["jobs"]]}
    for start in (2500, 5000, 7500):
        top.axvline(start, color="grey", lw=0.5)
    top.set_ylabel(f"loads per step ({WINDOW}-step windows)")
    top.set_title("Four jobs starting 2500 steps apart, D = sample([0, 13333], 10000), cache 1000, RefCnt")
    top.legend(fontsize=8)
    bottom.set_xlabel("step (a job consumes one item per step)")
    bottom.set_ylabel("items delivered to the job")
    bottom.set_title("each job's progress: solid asynchronous (DSA), dashed synchronous (lockstep)", fontsize=9)
    bottom.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    fig.savefig(os.path.join(args.out, "appendix_io.png"), dpi=110)

    # Figure 2: loads per policy and cache size (mean over seeds).
    def mean_loads(sampler, policy, cache):
        return statistics.mean(runs[(sampler, policy, cache, s)]["loads"] for s in seeds)

    table = {}
    for cache in CACHES:
        row = {p: mean_loads("dsa", p, cache) for p in POLICIES}
        row["independent+lru"] = mean_loads("independent", "lru", cache)
        row["lockstep+refcnt"] = mean_loads("lockstep", "refcnt", cache)
        table[cache] = row
    fig, ax = plt.subplots(figsize=(9, 5.2))
    columns = POLICIES + ["independent+lru", "lockstep+refcnt"]
    width = 0.8 / len(columns)
    for i, col in enumerate(columns):
        label = f"DSA + {col}" if col in POLICIES else col
        ax.bar([c + (i - len(columns) / 2) * width for c in range(len(CACHES))], [table[c][col] for c in CACHES],
               width, label=label)
    deliveries = runs[("dsa", "refcnt", CACHES[0], 1)]["deliveries"]
    ax.axhline(deliveries, color="grey", lw=0.5)
    ax.set_xticks(range(len(CACHES)), [f"cache {c}" for c in CACHES])
    ax.set_ylabel(f"loads (misses), mean of {args.seeds} seeds; {deliveries} deliveries")
    ax.set_title("RefCnt vs generic cache policies, D = sample([0, 13333], 10000), 4 staggered jobs")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "appendix_policies.png"), dpi=110)

    with open(os.path.join(args.out, "appendix_results.json"), "w") as f:
        json.dump({"io": summary_io, "loads": {str(c): row for c, row in table.items()}, "deliveries": deliveries,
                   "seeds": args.seeds}, f, indent=1)

    print("| sampler (cache 1000, RefCnt, seed 1) | loads | L/D | last job ends at step |")
    print("|---|---:|---:|---:|")
    for sampler in ("lockstep", "dsa"):
        r = summary_io[sampler]
        print(f"| {sampler} | {r['loads']} | {r['ld_ratio']:.3f} | {max(r['end_steps'])} |")
    print()
    print("| cache | " + " | ".join(columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for cache in CACHES:
        print(f"| {cache} | " + " | ".join(f"{table[cache][c]:.0f}" for c in columns) + " |")


if __name__ == "__main__":
    main()
