"""One Joader job: joader.torch.DataLoader on the same ImageFolder (registered in the daemon with
resize 256, crop 224). Prints one JSON line: {"items", "seconds", "start", "end"}."""
import argparse
import json
import time

import numpy as np
import torch

import joader
from joader.torch import DataLoader


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--subset-seed", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    client = joader.Client(args.socket)
    n = client.dataset("e2e")["items"]
    ids = None
    if args.share < 1.0:
        ids = np.random.default_rng(args.subset_seed).permutation(n)[: int(n * args.share)]
    loader = DataLoader("e2e", batch_size=args.batch_size, indices=ids, epochs=args.epochs, client=client)
    start = time.monotonic()
    items = 0
    for _ in range(args.epochs):
        for images, labels in loader:
            items += len(labels)
            if args.sleep_ms:
                time.sleep(args.sleep_ms / 1000)
    end = time.monotonic()
    print(json.dumps({"items": items, "seconds": end - start, "start": start, "end": end}))


if __name__ == "__main__":
    main()
