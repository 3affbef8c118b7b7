#!/usr/bin/env python3
"""A k-fold sweep of stock training scripts at once: examples/stock_train.py as shipped (its DataLoader
import is Joader's) against the same script with torch's DataLoader import, on real photos, side by
side and alternating. Nothing is set for Joader: the first script's loader starts the daemon with
its default cache, and `joader stop` ends it after each run (every Joader run starts cold).

    /usr/bin/python3 bench/sweep.py --build build [--jobs 4] [--runs 3] [--photos 400]

Reports, per side, the sweep's wall time (from starting the k processes until the last exits, the
imports included, as a user waits for it) and each job's training-loop time (its own clock, from
its first epoch's start: after the imports), medians over the runs, and Joader's L/D.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JOADER_IMPORT = "from joader.torch import DataLoader  # was: from torch.utils.data import DataLoader"


def make_photos(folder, count, smallest, largest):
    made = os.path.join(folder, "made")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "data", "make_photos.py"), made, "--count", str(count),
                    "--min", str(smallest), "--max", str(largest)], check=True, capture_output=True)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(made) for f in fs)
    for n, path in enumerate(files):
        target = os.path.join(folder, "photos", f"class{n % 4}")
        os.makedirs(target, exist_ok=True)
        os.replace(path, os.path.join(target, f"{n:05d}{os.path.splitext(path)[1]}"))
    return os.path.join(folder, "photos")


def sweep(script, photos, args, env, work, tag):
    started = time.monotonic()
    errs = [open(os.path.join(work, f"{tag}-{n}.err"), "w+") for n in range(args.jobs)]
    procs = [subprocess.Popen([sys.executable, script, photos, "--folds", str(args.jobs), "--fold", str(n),
                               "--batch", str(args.batch), "--epochs", str(args.epochs), "--held-out",
                               str(args.held_out), "--seed", str(n), "--size", "112", "--workers", "2", "--recipe", args.recipe,
                               "--result", os.path.join(work, f"{tag}-{n}.json")],
                              env=env, stdout=subprocess.DEVNULL, stderr=errs[n])  # files: no pipe fills up
             for n in range(args.jobs)]
    for p in procs:
        p.wait()
    wall = time.monotonic() - started
    for p, err in zip(procs, errs):
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"{tag}: a job failed ({p.returncode}):\n{err.read()[-3000:]}")
        err.close()
    loops = []
    for n in range(args.jobs):
        with open(os.path.join(work, f"{tag}-{n}.json")) as f:
            loops.append(json.load(f)["seconds"])
    return wall, loops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--photos", type=int, default=400)
    ap.add_argument("--smallest", type=int, default=300)
    ap.add_argument("--largest", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--held-out", type=int, default=60)
    ap.add_argument("--recipe", choices=["crop", "ta_wide"], default="ta_wide")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="sweep-")
    try:
        print(f"making {args.photos} photos ({args.smallest}..{args.largest} px) ...", flush=True)
        photos = make_photos(work, args.photos, args.smallest, args.largest)
        joader_script = os.path.join(ROOT, "examples", "stock_train.py")
        with open(joader_script) as f:
            text = f.read()
        assert JOADER_IMPORT in text
        torch_script = os.path.join(work, "stock_train_torch.py")
        with open(torch_script, "w") as f:
            f.write(text.replace(JOADER_IMPORT, "from torch.utils.data import DataLoader"))
        socket = os.path.join(work, "j.sock")
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), JOADER_SOCKET=socket,
                   JOADER_BIN=os.path.join(build, "joader"))
        env.pop("JOADER_CACHE_SIZE", None)
        env.pop("JOADER_AUTOSTART", None)
        results = {"torch": [], "joader": []}
        ld = []
        for run in range(args.runs):
            for side in (("torch", "joader") if run % 2 == 0 else ("joader", "torch")):
                wall, loops = sweep(joader_script if side == "joader" else torch_script, photos, args, env, work, side)
                if side == "joader":
                    status = json.loads(subprocess.run([env["JOADER_BIN"], "status", "--json", "--socket", socket],
                                                       capture_output=True, text=True, check=True).stdout)
                    ld.append(status["ld_ratio"])
                    subprocess.run([env["JOADER_BIN"], "stop", "--socket", socket], capture_output=True, check=True)
                results[side].append((wall, statistics.median(loops)))
                print(f"run {run} {side:>6}: sweep {wall:6.1f} s, median job loop {statistics.median(loops):6.1f} s"
                      + (f", L/D {ld[-1]:.3f}" if side == "joader" else ""), flush=True)
        med = {side: (statistics.median(w for w, _ in r), statistics.median(l for _, l in r)) for side, r in results.items()}
        print(f"\n{args.jobs} jobs, {args.photos} photos {args.smallest}..{args.largest} px, recipe {args.recipe}, "
              f"{args.epochs} epochs, batch {args.batch}, medians of {args.runs} runs:")
        print(f"  torch DataLoader : sweep {med['torch'][0]:.1f} s, job loop {med['torch'][1]:.1f} s")
        print(f"  Joader           : sweep {med['joader'][0]:.1f} s, job loop {med['joader'][1]:.1f} s, "
              f"L/D {statistics.median(ld):.3f}")
        print(f"  torch / Joader   : sweep {med['torch'][0] / med['joader'][0]:.2f}x, "
              f"job loop {med['torch'][1] / med['joader'][1]:.2f}x")
    finally:
        subprocess.run([os.path.join(build, "joader"), "stop", "--socket", os.path.join(work, "j.sock")],
                       capture_output=True)  # a failed run leaves no daemon behind
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
