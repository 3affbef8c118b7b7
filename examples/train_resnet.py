#!/usr/bin/env python3
"""Train torchvision's ResNet-18 on an ImageFolder through Joader, with the standard ImageNet
recipe: RandomResizedCrop + RandomHorizontalFlip for training (plus, as torchvision's reference
recipes, --auto-augment ta_wide/ra/autoaugment and --random-erase P), Resize + CenterCrop to
evaluate.

Start the daemon once (`build/joader serve --cache-size 8GiB &`), then run as many of these as
you like, with different subsets, seeds or hyper-parameters: they share the reading and decoding
of every image, while each job draws its own random crops, fresh every epoch.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_resnet.py /data/imagenet/train \\
        --epochs 90 --batch-size 256 --subset 0.5 --device cuda

The dataset is registered decoded at each image's own size (no crop), so that the training job's
RandomResizedCrop sees the whole image, as torchvision's would; a held-out part of the items is
evaluated after each epoch by a second job on the same dataset. With --world-size/--rank (or
torch.distributed initialised) each rank receives its part of each epoch, as with
DistributedSampler.
"""
import argparse
import time

import numpy as np
import torch
import torchvision
import torchvision.transforms as T

import joader
from joader.torch import DataLoader


def train_pipeline(args):
    """torchvision's ClassificationPresetTrain: crop and flip, the auto-augment policy, the tensor
    conversion and ImageNet normalisation, random erasing. Passed whole as augment=: Joader runs
    all of it natively, per item, with torchvision's law and pixels (docs/PYTHON.md)."""
    interpolation = T.InterpolationMode.BILINEAR
    ops = [T.RandomResizedCrop(args.crop), T.RandomHorizontalFlip()]
    if args.auto_augment == "ta_wide":
        ops.append(T.TrivialAugmentWide(interpolation=interpolation))
    elif args.auto_augment == "ra":
        ops.append(T.RandAugment(interpolation=interpolation))
    elif args.auto_augment == "autoaugment":
        ops.append(T.AutoAugment(T.AutoAugmentPolicy.IMAGENET, interpolation=interpolation))
    ops += [T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    if args.random_erase > 0:
        ops.append(T.RandomErasing(args.random_erase))
    return T.Compose(ops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="an ImageFolder tree (class folders of images)")
    ap.add_argument("--dataset", default=None, help="name in the daemon (default: derived from the path)")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--subset", type=float, default=1.0, help="train on this random fraction of the items")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="items held out for evaluation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resize", type=int, default=256, help="evaluation: Resize(S) before the center crop")
    ap.add_argument("--crop", type=int, default=224, help="the crop size of training and evaluation")
    ap.add_argument("--store-resize", type=int, default=None,
                    help="store images with their shorter side resized to this (default: at their own size)")
    ap.add_argument("--auto-augment", choices=["ta_wide", "ra", "autoaugment"], default=None,
                    help="as torchvision's reference recipes: TrivialAugmentWide, RandAugment or AutoAugment(IMAGENET)")
    ap.add_argument("--random-erase", type=float, default=0.0, help="RandomErasing probability (after Normalize)")
    ap.add_argument("--workers", type=int, default=2,
                    help="processes for any op Joader runs in Python (none in these recipes)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--world-size", type=int, default=None)
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (smoke tests)")
    args = ap.parse_args()

    client = joader.Client(args.socket)
    # Decoded once for every job, at each image's own (or --store-resize'd) size. Without --dataset
    # the name comes from the folder and the prep: every run on this folder shares one dataset.
    info = client.add_dataset(args.dataset, source=f"imagefolder:{args.root}", resize=args.store_resize)
    name = info["name"]
    n = info["items"]
    order = np.random.default_rng(args.seed).permutation(n)
    n_val = int(n * args.val_fraction)
    val, train = order[:n_val], order[n_val:]
    train = train[: max(1, int(len(train) * args.subset))]

    loader = DataLoader(name, batch_size=args.batch_size, indices=train, epochs=args.epochs, client=client,
                        rank=args.rank, world_size=args.world_size, seed=args.seed, num_workers=args.workers,
                        augment=train_pipeline(args))
    evaluate = None
    if n_val > 0:
        evaluate = DataLoader(name, batch_size=args.batch_size, indices=val, epochs=args.epochs, client=client,
                              dtype=torch.float32, name=f"{name}-eval",
                              augment=T.Compose([T.Resize(args.resize), T.CenterCrop(args.crop)]))
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet18(num_classes=len(info["classes"]) or 1000).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.epochs * len(loader)))
    step = 0
    for epoch in range(args.epochs):
        model.train()
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
        line = f"epoch {epoch}: {seen} images, loss {total_loss / max(seen, 1):.3f}, {seen / elapsed:.0f} images/s"
        if evaluate is not None:
            model.eval()
            correct = total = 0
            with torch.no_grad():
                for images, labels in evaluate:
                    predicted = model(images.to(args.device)).argmax(1).cpu()
                    correct += int((predicted == labels).sum())
                    total += len(labels)
            line += f", held-out accuracy {correct / max(total, 1):.3f}"
        print(line)


if __name__ == "__main__":
    main()
