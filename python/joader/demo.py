"""`make demo` / `joader demo`: three stock PyTorch training scripts sharing one Joader daemon.

It generates a small ImageFolder (3000 JPEGs, 10 classes) in a temporary folder under build/ and
runs three copies of examples/stock_train.py — a plain torchvision script whose only change is
`from joader.torch import DataLoader` — with overlapping subsets (100 %, 75 %, 50 %), staggered
starts and different batch sizes. Nothing is started or registered by hand: the first script's
loader starts the daemon, and each script's ImageFolder is registered by its loader (one
registration for all three). Each trains with its own random crops and flips (RandomResizedCrop +
RandomHorizontalFlip, run per item in C++) and evaluates on 300 held-out items after every epoch
(Resize + CenterCrop, in the folder's order). The daemon's cache is set to 28 MiB (about 40 % of
the decoded dataset, through JOADER_CACHE_SIZE), so that the sharing must come from the coupled
sampler, not from caching everything. It shows live progress from the daemon and ends with what
each job did and how much decoding the sharing saved; then `joader stop`, and everything it created
is removed, also on Ctrl-C.

    PYTHONPATH=build/python /usr/bin/python3 -m joader.demo [--build build]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

JOBS = [  # name, share of the training items, batch size, start delay (s)
    ("baseline-all", 1.00, 32, 0.0),
    ("ablation-75pct", 0.75, 64, 2.0),
    ("fewshot-50pct", 0.50, 16, 4.0),
]
EPOCHS = 3
CLASSES, PER_CLASS = 10, 300


def progress_line(status):
    jobs = "  ".join(f"{j['name']}: done" if j["finished"] else
                     f"{j['name']}: epoch {j['epoch']} {j['delivered_in_epoch']}/{j['subset_size']}"
                     f" ({j['items_per_second']:.0f}/s)" for j in status["jobs"])
    return f"loads {status['loads']:>5}  deliveries {status['deliveries']:>6}  L/D {status['ld_ratio']:.2f}  | {jobs}"


def main():
    ap = argparse.ArgumentParser(description="Three stock PyTorch training scripts sharing one Joader daemon")
    ap.add_argument("--build", default=os.environ.get("JOADER_BUILD", "build"))
    args = ap.parse_args()

    import joader

    build = os.path.abspath(args.build)
    script = os.path.join(os.path.dirname(build), "examples", "stock_train.py")
    if not os.path.exists(script):
        raise SystemExit(f"error: {script} not found (run the demo from the source tree: make demo)")
    work = tempfile.mkdtemp(prefix="demo-", dir=build)
    os.chmod(work, 0o700)
    procs = []
    socket = os.path.join(work, "joader.sock")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), JOADER_SOCKET=socket,
               JOADER_BIN=os.path.join(build, "joader"), JOADER_CACHE_SIZE="28MiB", JOADER_AUTOSTART="1")
    client = None
    try:
        t0 = time.monotonic()
        print(f"Generating {CLASSES * PER_CLASS} JPEGs in {CLASSES} classes ...", flush=True)
        subprocess.run([os.path.join(build, "make_images"), os.path.join(work, "images"), "--classes", str(CLASSES),
                        "--per-class", str(PER_CLASS), "--size", "96x80", "--learnable"], check=True)
        print(f"Starting 3 copies of {os.path.relpath(script)} (a stock torchvision script; its one change:\n"
              "`from joader.torch import DataLoader`), with overlapping subsets, staggered starts and different\n"
              "batch sizes; each with its own RandomResizedCrop + RandomHorizontalFlip and a val pass on 300\n"
              "held-out items per epoch. The first one's loader starts the daemon:")
        for name, share, batch, _ in JOBS:
            print(f"  {name:<16} {share:>4.0%} of the training items, batch {batch:>2}, {EPOCHS} epochs")
        start = time.monotonic()
        pending = list(JOBS)
        tty = sys.stdout.isatty()
        last_print = 0.0
        while pending or any(p.poll() is None for p in procs):
            now = time.monotonic() - start
            while pending and pending[0][3] <= now:
                name, share, batch, _ = pending.pop(0)
                procs.append(subprocess.Popen(
                    [sys.executable, script, os.path.join(work, "images"), "--share", str(share), "--batch",
                     str(batch), "--epochs", str(EPOCHS), "--result", os.path.join(work, name + ".json")],
                    env=env, stdout=subprocess.DEVNULL))
            if client is None:
                if not os.path.exists(socket):
                    time.sleep(0.25)
                    continue
                client = joader.Client(socket)
            try:
                status = client.status()
            except joader.JoaderError:  # still starting
                time.sleep(0.25)
                continue
            if tty:
                print("\r" + progress_line(status)[:160].ljust(160), end="", flush=True)
            elif now - last_print >= 2:
                print(progress_line(status), flush=True)
                last_print = now
            time.sleep(0.25)
        if tty:
            print()
        failed = [name for (name, *_), p in zip(JOBS, procs) if p.returncode != 0]
        if failed:
            raise RuntimeError(f"training job(s) failed: {failed}")
        status = client.status()
        results = []
        for name, *_ in JOBS:
            with open(os.path.join(work, name + ".json")) as f:
                results.append(dict(json.load(f), name=name))
        print(f"\n{'job':<16} {'epochs':>6} {'items':>7}   {'mean loss per epoch':<26} held-out accuracy")
        for r in results:
            losses = " → ".join(f"{x:.3f}" for x in r["losses"])
            print(f"{r['name']:<16} {r['epochs']:>6} {r['items']:>7}   {losses:<26} "
                  + " → ".join(f"{x:.2f}" for x in r["accuracy"]))
        loads, deliveries = status["loads"], status["deliveries"]
        print(f"\ndaemon: {loads} loads (read + decode) for {deliveries} deliveries (training and evaluation): "
              f"L/D {status['ld_ratio']:.3f}")
        print(f"Independent DataLoaders would have decoded {deliveries} images; Joader decoded {loads}: "
              f"{100 * (1 - loads / deliveries):.0f} % of the decode work saved. The crops stayed each job's own.")
        print(f"(total {time.monotonic() - t0:.0f} s)")
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the jobs and the daemon")
        return 130
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.path.exists(socket):
            subprocess.run([os.path.join(build, "joader"), "stop", "--socket", socket], env=env,
                           stdout=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
