#!/usr/bin/env python3
"""Daemon benchmarks (C++ clients), each configuration measured side by side in one run:

1. delivery: one job reading cached 150 KB items (224x224x3) from the arena, gathering each batch
   into one buffer: items/s and GB/s.
2. sharing: 4 jobs on one synthetic JPEG dataset (500x375 -> resize 256 -> crop 224), identical
   subsets, same start: aggregate images/s through one daemon (DSA + RefCnt, T loader threads)
   vs the same 4 jobs each with its own private loader (4 daemons of T/4 loader threads each: no
   sharing at all, L/D = 1). Same total thread count, same machine. Also the L/D that
   `joader status` reports.

    make build && /usr/bin/python3 bench/daemon_bench.py [--runs 3] [--items 2000] [--threads 4]

With --compare OTHER_BUILD (a build folder of another version), measures instead 1., 2. (one
daemon only) and 3. for both builds alternately, --runs rounds, and prints each round's pair and
the median ratios: an A/B of two versions of the daemon in the same window.

3. own size (--compare only): one job's first epoch of 500x375 JPEG files (an ImageFolder that
   make_images writes once, under the temporary folder) stored decoded at their own size (the
   training pipeline's daemon side), bound by the daemon's loads: images/s.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from daemon_process import Daemon as SharedDaemon  # noqa: E402  (python/joader/daemon.py)

BUILD = os.environ.get("JOADER_BUILD", "build")


class Daemon(SharedDaemon):
    def __init__(self, tmp, *args, name="bench"):
        super().__init__(f"{BUILD}/joader", tmp, name=name, extra=args)

    def start_jobs(self, n, *args):
        return [subprocess.Popen([f"{BUILD}/bench_client", "--socket", self.socket, *args],
                                 stdout=subprocess.PIPE, text=True) for _ in range(n)]

    def jobs(self, n, *args):
        return [json.loads(p.communicate()[0]) for p in self.start_jobs(n, *args)]


def delivery(tmp, runs):
    d = Daemon(tmp, "--cache-size", "1GiB", "--threads", "2")
    try:
        d.cli("dataset", "add", "cached", "--source", "synthetic:1000:256x256", "--crop", "224")
        results = []
        for _ in range(runs):
            r = d.jobs(1, "--dataset", "cached", "--batch", "64", "--epochs", "4", "--warmup-epochs", "1")[0]
            results.append(r)
            print(f"  delivery run: {r['items_per_s']:.0f} items/s, {r['gb_per_s']:.2f} GB/s", file=sys.stderr)
        return results
    finally:
        d.stop()


JPEG = ["--resize", "256", "--crop", "224"]
JOB = ["--dataset", "jpeg", "--batch", "32", "--epochs", "1"]


def sharing(tmp, items, threads):
    """4 jobs through one daemon."""
    d = Daemon(tmp, "--cache-size", "256MiB", "--threads", str(threads))
    try:
        d.cli("dataset", "add", "jpeg", "--source", f"synthetic:{items}:500x375", *JPEG)
        start = time.monotonic()
        results = d.jobs(4, *JOB)
        wall = time.monotonic() - start
        status = d.status()
        return {"images_per_s": sum(r["items"] for r in results) / wall, "ld_ratio": status["ld_ratio"]}
    finally:
        d.stop()


def private(tmp, items, threads):
    """The same 4 jobs, each with its own daemon: nothing shared."""
    # The same loader threads in total as the shared daemon: threads // 4 each, the remainder to the
    # first ones (with fewer than 4 threads each private daemon still needs one).
    shares = [max(1, threads // 4 + (1 if i < threads % 4 else 0)) for i in range(4)]
    daemons = [Daemon(tmp, "--cache-size", "64MiB", "--threads", str(shares[i]), name=f"private{i}")
               for i in range(4)]
    try:
        for d in daemons:
            d.cli("dataset", "add", "jpeg", "--source", f"synthetic:{items}:500x375", *JPEG)
        start = time.monotonic()
        procs = [d.start_jobs(1, *JOB)[0] for d in daemons]
        results = [json.loads(p.communicate()[0]) for p in procs]
        wall = time.monotonic() - start
        statuses = [d.status() for d in daemons]
        ld = sum(s["loads"] for s in statuses) / sum(s["deliveries"] for s in statuses)
        return {"images_per_s": sum(r["items"] for r in results) / wall, "ld_ratio": ld}
    finally:
        for d in daemons:
            d.stop()


def own_size(tmp, root, threads):
    """One job, first epoch, the JPEGs under root decoded at their own size: the daemon's loads bound it."""
    d = Daemon(tmp, "--cache-size", "512MiB", "--threads", str(threads))
    try:
        d.cli("dataset", "add", "own", "--source", f"imagefolder:{root}")
        start = time.monotonic()
        result = d.jobs(1, "--dataset", "own", "--batch", "32", "--epochs", "1", "--prefetch", "8")[0]
        return result["items"] / (time.monotonic() - start)
    finally:
        d.stop()


def compare(other, runs, items, threads):
    """This build (BUILD) against OTHER, alternately: delivery items/s, 4 shared jobs' img/s and one
    job's img/s at the images' own size."""
    global BUILD
    this = BUILD
    rows = []
    files = tempfile.TemporaryDirectory(prefix="joader-bench-files-")
    root = os.path.join(files.name, "jpegs")
    subprocess.run([f"{this}/make_images", root, "--classes", "10", "--per-class", str(items // 10), "--size",
                    "500x375"], check=True, stdout=subprocess.DEVNULL)
    for run in range(runs):
        pair = {}
        for name, build in (("other", other), ("this", this)):
            BUILD = build
            with tempfile.TemporaryDirectory(prefix="joader-bench-") as tmp:
                os.chmod(tmp, 0o700)
                pair[name] = (delivery(tmp, 1)[0]["items_per_s"], sharing(tmp, items, threads)["images_per_s"],
                              own_size(tmp, root, threads))
        BUILD = this
        rows.append(pair)
        print(f"  round {run + 1}: {other}: " + ", ".join(f"{v:.0f}" for v in pair["other"]) + f" | {this}: " +
              ", ".join(f"{v:.0f}" for v in pair["this"]), file=sys.stderr)
    med = statistics.median
    columns = ("delivery items/s", "4 shared jobs img/s", "1 job at own size img/s")
    print("| round | " + " | ".join(f"{c}, {other} | {this} | ratio" for c in columns) + " |")
    print("|---:|" + "---:|---:|---:|" * len(columns))
    cells = lambda a, b, r: " | ".join(f"{x:.0f} | {y:.0f} | {q:.2f}" for x, y, q in zip(a, b, r))
    for i, p in enumerate(rows, 1):
        print(f"| {i} | " + cells(p["other"], p["this"], [t / o for o, t in zip(p["other"], p["this"])]) + " |")
    k = range(len(columns))
    print("| median | " + cells([med(p["other"][c] for p in rows) for c in k], [med(p["this"][c] for p in rows) for c in k],
                                [med(p["this"][c] / p["other"][c] for p in rows) for c in k]) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=4, help="loader threads in total on each side")
    ap.add_argument("--compare", metavar="OTHER_BUILD", help="A/B this build against another build folder")
    args = ap.parse_args()
    if args.compare:
        return compare(args.compare, args.runs, args.items, args.threads)
    with tempfile.TemporaryDirectory(prefix="joader-bench-") as tmp:
        os.chmod(tmp, 0o700)
        print("delivery of cached items ...", file=sys.stderr)
        dl = delivery(tmp, args.runs)
        pairs = []
        for run in range(args.runs):
            shared = sharing(tmp, args.items, args.threads)
            alone = private(tmp, args.items, args.threads)
            pairs.append((shared, alone))
            print(f"  sharing run {run + 1}: one daemon {shared['images_per_s']:.0f} img/s (L/D {shared['ld_ratio']:.3f}), "
                  f"private loaders {alone['images_per_s']:.0f} img/s (L/D {alone['ld_ratio']:.3f})", file=sys.stderr)

    med = statistics.median
    print(f"Delivery of cached 150 KB items to one job (median of {args.runs}): "
          f"{med(r['items_per_s'] for r in dl):.0f} items/s, {med(r['gb_per_s'] for r in dl):.2f} GB/s\n")
    print(f"4 jobs, identical subsets of {args.items} synthetic JPEGs (500x375 -> 256 -> 224), "
          f"{args.threads} loader threads in total on each side; median of {args.runs} runs:\n")
    print("| run | one daemon (DSA + RefCnt) img/s | L/D | 4 private loaders img/s | L/D | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    for i, (s, p) in enumerate(pairs, 1):
        print(f"| {i} | {s['images_per_s']:.0f} | {s['ld_ratio']:.3f} | {p['images_per_s']:.0f} | "
              f"{p['ld_ratio']:.3f} | {s['images_per_s'] / p['images_per_s']:.2f}× |")
    speedups = [s["images_per_s"] / p["images_per_s"] for s, p in pairs]
    print(f"| median | {med(s['images_per_s'] for s, _ in pairs):.0f} | {med(s['ld_ratio'] for s, _ in pairs):.3f} | "
          f"{med(p['images_per_s'] for _, p in pairs):.0f} | {med(p['ld_ratio'] for _, p in pairs):.3f} | "
          f"{med(speedups):.2f}× |")


if __name__ == "__main__":
    main()
