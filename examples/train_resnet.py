#!/usr/bin/env python3
"""Train torchvision's ResNet-18 on an ImageFolder through Joader.

Start the daemon once (`build/joader serve --cache-size 8GiB &`), then run as many of these as
you like, with different subsets, seeds or hyper-parameters: they share the reading and decoding.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_resnet.py /data/imagenet/train \\
        --epochs 90 --batch-size 256 --subset 0.5 --device cuda

With --world-size/--rank (or torch.distributed initialised) each rank receives its part of each
epoch, as with DistributedSampler.
"""
import argparse
import time

import numpy as np
import torch
import torchvision

import joader
from joader.torch import DataLoader


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="an ImageFolder tree (class folders of images)")
    ap.add_argument("--dataset", default=None, help="name in the daemon (default: derived from the path)")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--subset", type=float, default=1.0, help="train on this random fraction of the items")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resize", type=int, default=256)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--world-size", type=int, default=None)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (smoke tests)")
    args = ap.parse_args()

    client = joader.Client(args.socket)
    name = args.dataset or f"imagefolder-{abs(hash((args.root, args.resize, args.crop))) % 10**8}"
    info = client.add_dataset(name, source=f"imagefolder:{args.root}", resize=args.resize, crop=args.crop)
    n = info["items"]
    indices = None
    if args.subset < 1.0:
        indices = np.random.default_rng(args.seed).permutation(n)[: int(n * args.subset)]

    def augment(images, labels):  # per job, after delivery: random horizontal flips
        flip = torch.rand(images.shape[0], device=images.device) < 0.5
        images[flip] = images[flip].flip(3)
        return images, labels

    loader = DataLoader(name, batch_size=args.batch_size, indices=indices, epochs=args.epochs, client=client,
                        dtype=torch.float32, transform=augment, rank=args.rank, world_size=args.world_size,
                        seed=args.seed)
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=len(info["classes"]) or 1000).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.epochs * len(loader)))
    step = 0
    for epoch in range(args.epochs):
        start, seen, total_loss = time.monotonic(), 0, 0.0
        for images, labels in loader:
            images = images.to(args.device, non_blocking=True)
            labels = labels.to(args.device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            seen += len(labels)
            total_loss += loss.item() * len(labels)
            step += 1
            if args.max_steps is not None and step >= args.max_steps:
                print(f"stopped after {step} steps, loss {loss.item():.3f}")
                return
        elapsed = time.monotonic() - start
        print(f"epoch {epoch}: {seen} images, loss {total_loss / max(seen, 1):.3f}, {seen / elapsed:.0f} images/s")


if __name__ == "__main__":
    main()
