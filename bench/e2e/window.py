#!/usr/bin/env python3
"""Joader's side alone of one bench/e2e scenario, and how busy the CPUs were in its window.

    /usr/bin/python3 bench/e2e/window.py [--build build] [--pipeline eval] [--scenario "b: k=4 identical"]

Runs the scenario's Joader jobs once against a fresh daemon (as run.py does, same data under
BUILD/e2e-data, made by run.py) while sampling /proc/stat every 20 ms, and prints the images/s,
the share of the window (first job's first request to the last job's end) the CPUs were busy,
the daemon's L/D and the spread of the jobs' starts. Quick (no baseline, no cost measurement):
for A/B of one setting, e.g. /dev/shm's huge pages (docs/DAEMON.md, "Huge pages").
"""
import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as e2e  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--pipeline", choices=["eval", "train"], default="eval")
    ap.add_argument("--scenario", default="b: k=4 identical")
    ap.add_argument("--arena-wait", type=float, default=e2e.ARENA_WAIT,
                    help="as run.py's (0: the jobs start as soon as the daemon serves)")
    args = ap.parse_args()
    e2e.ARENA_WAIT = args.arena_wait
    build = os.path.abspath(args.build)
    root = os.path.join(build, "e2e-data")
    if not os.path.isdir(root):
        ap.error(f"{root}: no data; run bench/e2e/run.py --build {args.build} once first")
    jobs = e2e.scenarios(1.0, args.pipeline).get(args.scenario)
    if jobs is None:
        ap.error(f"--scenario {args.scenario!r}: one of {', '.join(e2e.scenarios(1.0, args.pipeline))}")

    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            samples.append((time.monotonic(), sum(v), v[3] + v[4]))  # total, idle + iowait
            time.sleep(0.02)

    results = {}
    run_jobs = e2e.run_jobs

    def keep(commands, starts, env=None):
        results["jobs"] = run_jobs(commands, starts, env)
        return results["jobs"]

    e2e.run_jobs = keep
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = e2e.run_joader(build, root, jobs, tmp, args.pipeline)
    finally:
        stop.set()
        sampler.join()
    t0 = min(r["start"] for r in results["jobs"])
    t1 = max(r["end"] for r in results["jobs"])
    inside = [s for s in samples if t0 <= s[0] <= t1]
    busy = 1 - (inside[-1][2] - inside[0][2]) / (inside[-1][1] - inside[0][1]) if len(inside) > 1 else float("nan")
    print(f"{args.pipeline}, {args.scenario}: {out['images_per_s']:.0f} img/s, window {t1 - t0:.2f} s, "
          f"CPUs busy {100 * busy:.1f} %, L/D {out['ld_ratio']:.3f}, starts within "
          f"{1000 * (max(r['start'] for r in results['jobs']) - t0):.0f} ms, arena {out['arena_pages']} "
          f"({out['arena_huge_bytes'] >> 20} MiB in 2 MiB pages)")


if __name__ == "__main__":
    main()
