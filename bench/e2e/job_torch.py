"""One baseline job: torch.utils.data.DataLoader over torchvision's ImageFolder, as users run it
today. Prints one JSON line: {"items", "seconds", "start", "end"} (monotonic clock)."""
import argparse
import json
import time

import numpy as np
import torch
import torchvision
from torchvision import transforms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--subset-seed", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0, help="simulated training time per batch")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(args.root, transform=tf)
    if args.share < 1.0:
        ids = np.random.default_rng(args.subset_seed).permutation(len(ds))[: int(len(ds) * args.share)]
        ds = torch.utils.data.Subset(ds, ids.tolist())
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                         persistent_workers=args.workers > 0)
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
