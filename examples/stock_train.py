#!/usr/bin/env python3
"""A stock torchvision training script, with one line changed: the DataLoader import. Run several
at once (a sweep: folds, seeds, subsets) and they share the reading and decoding of every image
through one Joader daemon, which the first of them starts. `make demo` runs three of these;
bench/sweep.py times four against the same script with torch's own DataLoader.

    PYTHONPATH=build/python /usr/bin/python3 examples/stock_train.py IMAGEFOLDER --share 0.5 --batch 32

Everything below the import is plain PyTorch: an ImageFolder with a random-crop recipe, a Subset
for the job's share of the training items, a val pass in the folder's order after each epoch,
OneCycleLR over len(loader). Deleting the Joader import line (and restoring torch's) gives the
same training with torch's DataLoader.
"""
import argparse
import json
import time

import numpy as np
import torch
import torchvision.transforms as T
from torch.utils.data import Subset
from torchvision import datasets
from joader.torch import DataLoader  # was: from torch.utils.data import DataLoader


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="an ImageFolder tree (class folders of images)")
    ap.add_argument("--share", type=float, default=1.0, help="train on this share of the training items")
    ap.add_argument("--folds", type=int, default=1, help="k-fold: leave out every k-th training item ...")
    ap.add_argument("--fold", type=int, default=0, help="... starting from this one")
    ap.add_argument("--held-out", type=int, default=300, help="items held out for the val pass")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--size", type=int, default=64, help="the crop size")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--recipe", choices=["crop", "ta_wide"], default="crop",
                    help="crop: RandomResizedCrop + flip; ta_wide: also TrivialAugmentWide and RandomErasing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result", help="write the job's losses and accuracies here (JSON)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    ops = [T.RandomResizedCrop(args.size, scale=(0.35, 1.0)), T.RandomHorizontalFlip()]
    if args.recipe == "ta_wide":
        ops += [T.TrivialAugmentWide(), T.ToTensor(), T.RandomErasing(0.25)]
    else:
        ops += [T.ToTensor()]
    recipe = T.Compose(ops)
    evaluation = T.Compose([T.Resize(args.size * 9 // 8), T.CenterCrop(args.size), T.ToTensor()])
    train_set = datasets.ImageFolder(args.root, transform=recipe)
    val_set = datasets.ImageFolder(args.root, transform=evaluation)
    order = np.random.default_rng(7).permutation(len(train_set))  # the same held-out items for every job
    held_out, rest = sorted(order[:args.held_out].tolist()), order[args.held_out:].tolist()
    mine = [item for n, item in enumerate(rest) if args.folds == 1 or n % args.folds != args.fold]
    fold = Subset(train_set, mine[: int(len(mine) * args.share)])
    loader = DataLoader(fold, batch_size=args.batch, shuffle=True, num_workers=args.workers, drop_last=True,
                        persistent_workers=args.workers > 0)
    val_loader = DataLoader(Subset(val_set, held_out), batch_size=100)

    classes = len(train_set.classes)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(32 * 16, classes))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=args.epochs * len(loader))
    items, losses, accuracies = 0, [], []
    started = time.monotonic()
    for epoch in range(args.epochs):
        model.train()
        epoch_losses = []
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            scheduler.step()
            items += len(labels)
            epoch_losses.append(loss.item())
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for images, labels in val_loader:
                correct += int((model(images).argmax(1) == labels).sum())
                total += len(labels)
        losses.append(sum(epoch_losses) / len(epoch_losses))
        accuracies.append(correct / total)
        print(f"epoch {epoch}: loss {losses[-1]:.3f}, val accuracy {accuracies[-1]:.2f}", flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump({"epochs": args.epochs, "items": items, "losses": losses, "accuracy": accuracies,
                       "seconds": time.monotonic() - started}, f)


if __name__ == "__main__":
    main()
