"""Float batches: the DataLoader's float32 conversion (ToTensor + Normalize arithmetic) done by the
native gather in the pass that writes the batch, against the same conversion done afterwards in
torch on the uint8 batch (what DataLoader(dtype=torch.float32) did before), side by side in turns
on one daemon whose cache holds the whole dataset (so both measure the gather + conversion only).

    JOADER_BUILD=build /usr/bin/python3 bench/float_batches.py [--items 1024] [--batch 64] [--runs 5]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

BUILD = os.environ.get("JOADER_BUILD", "build")
sys.path.insert(0, os.path.join(BUILD, "python"))
import torch  # noqa: E402

import joader  # noqa: E402
import joader.torch  # noqa: E402
from joader.daemon import Daemon  # noqa: E402


def epoch_seconds(client, args, fused):
    loader = joader.torch.DataLoader("crops", batch_size=args.batch, epochs=1, client=client, dtype=torch.float32)
    if not fused:
        loader._to_float = None
        loader._loader._to_float = None  # uint8 from the gather, converted by torch afterwards
    started = time.perf_counter()
    n = 0
    for images, _ in loader:
        assert images.dtype == torch.float32
        n += len(images)
    loader.close()
    assert n == args.items
    return time.perf_counter() - started


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--items", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--torch-threads", type=int, default=None, help="torch's intra-op threads (default: torch's own)")
    args = p.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o700)
        with Daemon(os.path.join(BUILD, "joader"), d, cache_size="1GiB", threads=2) as daemon:
            client = joader.Client(daemon.socket)
            client.add_dataset("crops", source=f"synthetic:{args.items}:256x256", crop=224)
            epoch_seconds(client, args, True)  # warm-up: every item decoded once, then cached
            times = {True: [], False: []}
            for _ in range(args.runs):
                for fused in (False, True):
                    times[fused].append(epoch_seconds(client, args, fused))
    old, new = statistics.median(times[False]), statistics.median(times[True])
    per = 1e3 / args.items
    print(f"{args.items} items of 3x224x224, batch {args.batch}, torch threads {torch.get_num_threads()}, "
          f"medians of {args.runs} epochs in turns:")
    print(f"  uint8 gather, then torch float/255, -mean, /std : {old * per:.3f} ms per image")
    print(f"  fused into the gather                          : {new * per:.3f} ms per image  ({old / new:.2f}x)")


if __name__ == "__main__":
    main()
