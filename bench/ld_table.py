#!/usr/bin/env python3
"""L/D table: samplers × cache policies on the scenarios S1–S4 of the foundation issue,
mean over 5 seeds, computed by `joader simulate` (the same classes as the daemon).

    /usr/bin/python3 bench/ld_table.py --joader build/joader [--seeds 5] [--jobs 2]

Prints Markdown: one row per (scenario, cache, sampler), one column per policy, and the share of
the RefCnt→Belady gap that the `rate` and `planned` policies close under DSA.
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile

SAMPLERS = ["dsa", "independent", "lockstep"]
POLICIES = ["refcnt", "rate", "planned", "lru", "fifo", "belady"]


def scenarios(seed):
    """(label, cache sizes, scenario dict) for one seed; subsets drawn from the seed too."""
    ident = [{"subset": {"range": [0, 10000]}} for _ in range(4)]
    s2 = [{"subset": {"sample": 10000, "seed": 1000 * seed + j}, "start": 2500 * j} for j in range(4)]
    s3 = [{"subset": {"range": [0, 10000]}, "speed": v} for v in (1, 1.5, 2, 3)]
    s4 = [{"subset": {"sample": n, "seed": 1000 * seed}} for n in (2500, 5000, 7500, 10000)]
    base = {"epochs": 3, "seed": seed}
    return [
        ("S1 identical", [1000], dict(base, universe=10000, jobs=ident)),
        ("S2 75% samples, staggered", [1000, 2500, 5000], dict(base, universe=13334, jobs=s2)),
        ("S3 identical, speeds 1/1.5/2/3", [1000, 5000], dict(base, universe=10000, jobs=s3)),
        ("S4 nested 25/50/75/100%", [1000], dict(base, universe=10000, jobs=s4)),
    ]


def run(joader, path, sampler, policy, cache):
    out = subprocess.run(
        [joader, "simulate", "--scenario", path, "--json", "--sampler", sampler, "--policy", policy,
         "--cache-items", str(cache)], check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    # Mean job completion time: each job's end step minus its start step.
    starts = [j.get("start", 0) for j in json.load(open(path))["jobs"]]
    spans = [j["end_step"] - s for j, s in zip(result["jobs"], starts)]
    return result["ld_ratio"], statistics.mean(spans)


def simulation_args(doc):
    """The options of the scripts that run many simulations: --joader, --seeds, --jobs."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--joader", default="build/joader")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2, help="parallel simulations")
    return ap.parse_args()


def main():
    args = simulation_args(__doc__)

    tmp = tempfile.mkdtemp(prefix="joader-ld-")
    tasks = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for seed in range(1, args.seeds + 1):
            for label, caches, sc in scenarios(seed):
                path = os.path.join(tmp, f"{label.split()[0]}-{seed}.json")
                with open(path, "w") as f:
                    json.dump(sc, f)
                for cache in caches:
                    for sampler in SAMPLERS:
                        for policy in POLICIES:
                            key = (label, cache, sampler, policy)
                            tasks.setdefault(key, []).append(
                                pool.submit(run, args.joader, path, sampler, policy, cache))
        done = 0
        results, steps = {}, {}
        for key, futures in tasks.items():
            runs = [f.result() for f in futures]
            results[key] = statistics.mean(r[0] for r in runs)
            steps[key] = statistics.mean(r[1] for r in runs)
            done += 1
            if done % 15 == 0 or done == len(tasks):
                print(f"{done}/{len(tasks)} configurations", file=sys.stderr)

    print(f"L/D = loads / deliveries, mean of {args.seeds} seeds, 3 epochs per job.\n")
    print("| scenario | cache | sampler | " + " | ".join(POLICIES) + " |")
    print("|---|---:|---|" + "---:|" * len(POLICIES))
    seen = []
    for (label, cache, sampler, policy) in tasks:
        if (label, cache, sampler) in seen:
            continue
        seen.append((label, cache, sampler))
        cells = " | ".join(f"{results[(label, cache, sampler, p)]:.3f}" for p in POLICIES)
        print(f"| {label} | {cache} | {sampler} | {cells} |")

    print("\nMean job completion time (steps from a job's start to its last item) relative to DSA:")
    print("lockstep's low L/D is bought by making jobs wait for each other.\n")
    print("| scenario | cache | dsa (steps) | independent | lockstep |")
    print("|---|---:|---:|---:|---:|")
    for (label, cache, sampler) in seen:
        if sampler != "dsa":
            continue
        base = steps[(label, cache, "dsa", "refcnt")]
        rel = " | ".join(f"{steps[(label, cache, s, 'refcnt')] / base:.2f}×" for s in ("independent", "lockstep"))
        print(f"| {label} | {cache} | {base:.0f} | {rel} |")

    print("\nShare of the DSA RefCnt→Belady gap closed by `rate` and `planned` (positive = better than"
          " RefCnt):\n")
    print("| scenario | cache | refcnt | rate | planned | belady | rate closes | planned closes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (label, cache, sampler) in seen:
        if sampler != "dsa":
            continue
        r, q, p, b = (results[(label, cache, "dsa", x)] for x in ("refcnt", "rate", "planned", "belady"))
        closed = [f"{100 * (r - x) / (r - b):.0f} %" if r - b > 1e-9 else "n/a (no gap)" for x in (q, p)]
        print(f"| {label} | {cache} | {r:.3f} | {q:.3f} | {p:.3f} | {b:.3f} | {closed[0]} | {closed[1]} |")


if __name__ == "__main__":
    main()
