#!/usr/bin/env python3
"""CPU per delivered image when nothing has to be prepared: one joader.torch job reading items that
are all in the cache, and the daemon serving it. These are the per-delivery costs of the end-to-end
limit in docs/BENCHMARKS.md (prep per load comes from build/prep_bench).

    make build && /usr/bin/python3 bench/client_cost.py [--runs 3] [--items 1000] [--epochs 4]

A daemon (2 loader threads, 512 MiB) holds a synthetic dataset of 224x224 crops; one warm-up epoch
loads every item, then the job reads 1 + --epochs epochs in batches of 64 (uint8, layout NCHW, then
NHWC), the first one not timed: it holds the job's set-up (registration, mapping the arena) and its
first reads of the arena's pages, which on a VM that traps them cost ~100 us per image — a cost of
a job's first pass over the pages, not of a delivery (docs/BENCHMARKS.md, "First touches"). The
timed epochs read the items as the job's first epoch would (copied where the probe found that
trap, src/ipc/arena_reads.h, for the first 4 reads of a page). Reported per delivered image,
medians of --runs: the job process's CPU (its Python loop, the binding's gather and
acknowledgement) and the daemon's CPU (dispatch, delivery, gRPC) over the timed epochs, once the
daemon's arena is ready (its background thread has touched every page: status arena_ready).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from daemon_process import Daemon, cpu_seconds  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import torch  # noqa: F401  (imported before the window)
    import joader
    import joader.torch
    results = {"NCHW": [], "NHWC": []}
    with tempfile.TemporaryDirectory(prefix="joader-client-cost-") as tmp:
        os.chmod(tmp, 0o700)
        daemon = Daemon(os.path.join(build, "joader"), tmp, name="cost", cache_size="512MiB", threads=2)
        try:
            client = joader.Client(daemon.socket)
            daemon.wait_arena_ready(120)  # its populate thread's CPU is not a delivery's
            client.add_dataset("cached", source=f"synthetic:{args.items}:256x256", crop=224)
            for _ in joader.Loader("cached", batch_size=64, client=client):  # loads every item once
                pass
            for run in range(args.runs):
                for layout in ("NCHW", "NHWC"):
                    loader = joader.torch.DataLoader("cached", batch_size=64, epochs=1 + args.epochs,
                                                     client=client, layout=layout)
                    for _ in loader:  # the untimed first epoch (see above)
                        pass
                    daemon0, job0, n = cpu_seconds(daemon.proc.pid), time.process_time(), 0
                    for _ in range(args.epochs):
                        for images, _labels in loader:
                            n += len(images)
                    job_ms = 1000 * (time.process_time() - job0) / n
                    daemon_ms = 1000 * (cpu_seconds(daemon.proc.pid) - daemon0) / n
                    results[layout].append((job_ms, daemon_ms))
                    print(f"  run {run + 1} {layout}: job {job_ms:.4f} ms, daemon {daemon_ms:.4f} ms CPU per image",
                          file=sys.stderr)
        finally:
            daemon.stop()
    med = statistics.median
    print(f"CPU per delivered 224x224 image, cached, batches of 64, median of {args.runs}:")
    for layout, rows in results.items():
        print(f"  {layout}: job {med(r[0] for r in rows):.4f} ms, daemon {med(r[1] for r in rows):.4f} ms")


if __name__ == "__main__":
    main()
