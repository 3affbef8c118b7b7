#!/usr/bin/env python3
"""The disk tier with torchvision's reference training recipe, one job through the Python client,
against one torch DataLoader on the same machine: issue 40's k = 1 figures.

    sudo /usr/bin/python3 bench/disk_tier_recipe.py --build build [--runs 3] [--epochs 3]

The dataset is bench/disk_tier.py's (an ImageFolder of --count real-photo JPEGs whose longer side is
500 px, made once in --data). The recipe is bench/e2e/timed.py's recipe(): RandomResizedCrop(224),
RandomHorizontalFlip, TrivialAugmentWide, PILToTensor, ConvertImageDtype(float), Normalize,
RandomErasing(0.1), the same object on both sides. Alternating, --runs times:
  - Joader: a daemon with a --cache arena and an empty tier in --disk, --threads loader threads;
    a process that builds `joader.torch.DataLoader(ImageFolder(data, transform=recipe),
    batch_size=64, shuffle=True, num_workers=W)` (the script's one changed import) and iterates
    --epochs epochs;
  - torch: the same process with `torch.utils.data.DataLoader(..., num_workers=W,
    persistent_workers=True)`.
W = --workers (default: the CPU count): torch's worker processes; for Joader, the job's augment
threads and Python workers, beside the daemon's --threads loader threads (both sides use the whole
machine). Each epoch's window starts before the page cache is dropped (root only; after imports
and the loader's construction) and ends after its loop and a sync: the drop is inside it on both
sides, as is the writing of the tier in Joader's first epoch. Prints each epoch's images/s and the megabytes the block devices read in it
(/proc/diskstats) as JSON lines, then the medians and the ratios.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from disk_tier import Daemon, prepare, setup_arguments  # noqa: E402

JOB = """
import json, os, sys, time
sys.path.insert(0, {python!r})
sys.path.insert(0, {e2e!r})
sys.path.insert(0, {bench!r})
import torch, torchvision
from timed import recipe
from disk_tier import disk_read_bytes, drop_caches

side, data, epochs, workers = {side!r}, {data!r}, {epochs}, {workers}
dataset = torchvision.datasets.ImageFolder(data, transform=recipe())
if side == "joader":
    import joader, joader.torch
    loader = joader.torch.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                                     client=joader.Client({socket!r}))
else:
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                                         persistent_workers=True)
for epoch in range(epochs):
    # The window holds the page cache's drop and, at its end, a sync, on both sides: Joader's job
    # prepares ahead across the drop as it would across a training step, and the tier's writes of
    # the epoch are paid for in it.
    read0, start, n = disk_read_bytes(), time.monotonic(), 0
    drop_caches({drop})
    for images, labels in loader:
        assert images.dtype == torch.float32 and images.shape[1:] == (3, 224, 224)
        n += len(labels)
    os.sync()
    print(json.dumps({{"epoch": epoch + 1, "items": n, "items_per_s": round(n / (time.monotonic() - start), 1),
                      "device_read_mb": round((disk_read_bytes() - read0) / 1e6, 1)}}), flush=True)
"""


def job(args, side, socket, can_drop):
    script = JOB.format(python=os.path.join(args.build, "python"), e2e=os.path.join(HERE, "e2e"), bench=HERE, side=side,
                        data=args.data, epochs=args.epochs, workers=args.workers, socket=socket, drop=can_drop)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"the {side} job failed:\n{r.stdout}\n{r.stderr[-3000:]}")
    return [json.loads(line) for line in r.stdout.splitlines()]


def main():
    p = setup_arguments(__doc__)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    can_drop = prepare(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="joader-disk-tier-") as workdir:
        os.chmod(workdir, 0o700)
        for run in range(args.runs):
            shutil.rmtree(args.disk, ignore_errors=True)
            d = Daemon(os.path.join(args.build, "joader"), workdir, cache_size=args.cache, threads=args.threads,
                       extra=("--state", "none", "--disk-cache", args.disk), timeout=60)
            try:
                for row in job(args, "joader", d.socket, can_drop):
                    rows.append({"side": "joader, tier", **row})
                    print(json.dumps(rows[-1]), flush=True)
                s = d.status()
                print(json.dumps({"side": "joader, tier", "loads": s["loads"], "disk_reads": s["disk_reads"],
                                  "deliveries": s["deliveries"]}), flush=True)
            finally:
                d.stop()
            for row in job(args, "torch", None, can_drop):
                rows.append({"side": "torch DataLoader", **row})
                print(json.dumps(rows[-1]), flush=True)
    print("medians (images/s):")
    medians = {}
    for side in ("joader, tier", "torch DataLoader"):
        for e in range(1, args.epochs + 1):
            medians[side, e] = statistics.median(r["items_per_s"] for r in rows if r["side"] == side and r["epoch"] == e)
            print(json.dumps({"side": side, "epoch": e, "items_per_s": medians[side, e]}))
    for e in range(1, args.epochs + 1):
        print(json.dumps({"epoch": e, "joader_over_torch": round(medians["joader, tier", e] / medians["torch DataLoader", e], 2),
                          "joader_over_its_epoch_1": round(medians["joader, tier", e] / medians["joader, tier", 1], 2)}))


if __name__ == "__main__":
    main()
