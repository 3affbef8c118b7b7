#!/usr/bin/env python3
"""The disk tier (`joader serve --disk-cache`) against decoding every epoch, on a dataset whose
prepared size is several times the arena.

    sudo /usr/bin/python3 bench/disk_tier.py --build build [--count 3000] [--cache 256MiB] [--runs 3]
    sudo /usr/bin/python3 bench/disk_tier.py --build build --speeds 1,1,0.5,0.25 [--epochs 2] [--runs 3]

Makes (once, in --data) an ImageFolder of --count real-photo JPEGs whose longer side is 500 pixels
(tests/data/make_photos.py), stored at their own size (decoded, ~560 KB each in the arena). Then,
--runs times, alternating:
  - without the tier: a daemon, 3 epochs of one job (bench_client, batch 64), each epoch a job of
    its own;
  - with the tier, from an empty DIR: the same 3 epochs (the first decodes and writes, the others
    read back), then the daemon is stopped and a new one started on the same DIR, and one epoch
    (a restarted daemon's first epoch).
Before every epoch the page cache is dropped (echo 3 > /proc/sys/vm/drop_caches: root only;
without root it says so and the disk reads may come from memory). Each epoch's images/s, the
daemon's loads and disk reads, the bytes the block devices read (/proc/diskstats), the items the
arena placed in several blocks (split_items) and its blocks per cached item are printed as JSON
lines, then the medians.

With --speeds: k jobs at once (joader_test_client, batch 64, --epochs each, started together), job
j consuming a batch every --batch-ms / speed_j milliseconds, alternating a daemon without the tier
and one with an empty tier (the page cache dropped before each): each job's images/s, and the
daemon's decodes and disk reads per delivery.
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
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from daemon_process import Daemon  # noqa: E402  (python/joader/daemon.py by path: no native module needed)


def disk_read_bytes():
    """Bytes read by whole block devices (not partitions) since boot, from /proc/diskstats."""
    total = 0
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            name = fields[2]
            if os.path.exists(f"/sys/block/{name}") and not name.startswith(("loop", "ram", "zram")):
                total += int(fields[5]) * 512
    return total


def drop_caches(can):
    os.sync()
    if can:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def epoch(args, daemon, label, can_drop):
    drop_caches(can_drop)
    before = daemon.status()
    read0 = disk_read_bytes()
    r = subprocess.run([os.path.join(args.build, "bench_client"), "--socket", daemon.socket, "--dataset", "photos",
                        "--batch", "64", "--epochs", "1"], capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    after = daemon.status()
    row = {"run": label, "items_per_s": out["items_per_s"], "items": out["items"],
           "loads": after["loads"] - before["loads"], "disk_reads": after["disk_reads"] - before["disk_reads"],
           "device_read_mb": round((disk_read_bytes() - read0) / 1e6, 1),
           "split_items": after["split_items"] - before["split_items"],
           "blocks_per_item": round(after["cached_blocks"] / max(1, after["cached_items"]), 2)}
    print(json.dumps(row), flush=True)
    return row


def k_jobs(args, daemon, label, can_drop, workdir):
    """k jobs started together at the --speeds paces; their images/s and the daemon's loads."""
    drop_caches(can_drop)
    gate = os.path.join(workdir, "gate")
    if os.path.exists(gate):
        os.unlink(gate)
    speeds = [float(x) for x in args.speeds.split(",")]
    procs = []
    for j, speed in enumerate(speeds):
        out = open(os.path.join(workdir, f"job{j}.out"), "w+")
        procs.append((subprocess.Popen([os.path.join(args.build, "joader_test_client"), "--socket", daemon.socket,
                                        "--dataset", "photos", "--batch", "64", "--epochs", str(args.epochs),
                                        "--delay-ms", str(int(args.batch_ms / speed)), "--start-gate", gate,
                                        "--name", f"job{j}"], stdout=out, stderr=subprocess.PIPE, text=True), out))
    before = daemon.status()
    time.sleep(0.5)  # every job waits at the gate
    start = time.monotonic()
    with open(gate, "w"):
        pass
    rates = []
    for proc, out in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"a job failed: {err}")
        elapsed = time.monotonic() - start
        out.seek(0)
        rates.append(round(sum(1 for _ in out) / elapsed, 1))
        out.close()
    after = daemon.status()
    deliveries = after["deliveries"] - before["deliveries"]
    loads = after["loads"] - before["loads"]
    reads = after["disk_reads"] - before["disk_reads"]
    row = {"run": label, "items_per_s": rates, "decodes_per_delivery": round((loads - reads) / deliveries, 3),
           "disk_reads_per_delivery": round(reads / deliveries, 3)}
    print(json.dumps(row), flush=True)
    return row


def wait_written(daemon):
    while daemon.status().get("disk_cache", {}).get("queued_bytes", 0) > 0:
        time.sleep(0.1)


def serve(args, workdir, extra=()):
    d = Daemon(os.path.join(args.build, "joader"), workdir, cache_size=args.cache, threads=args.threads,
               extra=("--state", "none", *extra), timeout=60)
    d.cli("dataset", "add", "photos", "--source", "imagefolder:" + args.data, timeout=600)
    return d


def setup_arguments(doc):
    """The options this script and bench/disk_tier_recipe.py share: the build, the photos, the
    tier's folder, the arena, the loader threads, the runs."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--data", default="/var/tmp/joader-disk-tier-photos")
    p.add_argument("--disk", default="/var/tmp/joader-disk-tier-cache", help="the tier's folder (local disk)")
    p.add_argument("--count", type=int, default=3000)
    p.add_argument("--cache", default="256MiB")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    return p


def prepare(args):
    """Makes the photos if --data has none; returns whether the page cache can be dropped (root)."""
    can_drop = os.geteuid() == 0
    if not can_drop:
        print("not root: the page cache is not dropped, so 'disk' reads may come from memory", file=sys.stderr)
    if not os.path.isdir(args.data):
        print(f"making {args.count} photos in {args.data}", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "data", "make_photos.py"), args.data,
                        "--count", str(args.count), "--min", "500", "--max", "500", "--jpeg-only"], check=True)
    return can_drop


def main():
    p = setup_arguments(__doc__)
    p.add_argument("--speeds", help="k jobs at once at these relative paces, e.g. 1,1,0.5,0.25")
    p.add_argument("--batch-ms", type=float, default=20, help="with --speeds: a speed-1 job's time per batch")
    p.add_argument("--epochs", type=int, default=2, help="with --speeds: each job's epochs")
    args = p.parse_args()
    can_drop = prepare(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="joader-disk-tier-") as workdir:
        os.chmod(workdir, 0o700)
        for run in range(args.runs if args.speeds else 0):
            for tier in (False, True):
                shutil.rmtree(args.disk, ignore_errors=True)
                d = serve(args, workdir, ("--disk-cache", args.disk) if tier else ())
                try:
                    rows.append(k_jobs(args, d, "tier" if tier else "no tier", can_drop, workdir))
                finally:
                    d.stop()
        for run in range(0 if args.speeds else args.runs):
            d = serve(args, workdir)
            try:
                for e in range(3):
                    rows.append(epoch(args, d, f"no tier, epoch {e + 1}", can_drop))
            finally:
                d.stop()
            shutil.rmtree(args.disk, ignore_errors=True)
            d = serve(args, workdir, ("--disk-cache", args.disk))
            try:
                for e in range(3):
                    rows.append(epoch(args, d, f"tier, epoch {e + 1}", can_drop))
                    wait_written(d)
            finally:
                d.stop()
            d = serve(args, workdir, ("--disk-cache", args.disk))
            try:
                rows.append(epoch(args, d, "tier, restarted daemon's first epoch", can_drop))
            finally:
                d.stop()
    print("medians:")
    for label in dict.fromkeys(r["run"] for r in rows):
        of = [r for r in rows if r["run"] == label]
        if args.speeds:
            print(json.dumps({"run": label, "n": len(of),
                              "items_per_s": [statistics.median(r["items_per_s"][j] for r in of)
                                              for j in range(len(of[0]["items_per_s"]))],
                              **{k: statistics.median(r[k] for r in of)
                                 for k in ("decodes_per_delivery", "disk_reads_per_delivery")}}))
            continue
        print(json.dumps({"run": label, "n": len(of),
                          **{k: statistics.median(r[k] for r in of)
                             for k in ("items_per_s", "loads", "disk_reads", "device_read_mb", "split_items",
                                       "blocks_per_item")}}))


if __name__ == "__main__":
    main()
