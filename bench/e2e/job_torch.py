"""One baseline job: torch.utils.data.DataLoader over torchvision's ImageFolder, as users run it
today. Prints one JSON line: {"items", "seconds", "start", "end"} (monotonic clock)."""
import argparse

import torch
import torchvision
from torchvision import transforms

import timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--subset-seed", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0, help="simulated training time per batch")
    ap.add_argument("--pipeline", choices=["eval", "train", "recipe", "timm", "user"], default="eval")
    ap.add_argument("--prefetch-factor", type=int, default=2, help="batches each worker prepares ahead")
    ap.add_argument("--barrier", action="store_true", help="print 'ready', wait for a line on stdin, then start")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.pipeline == "recipe":
        tf = timed.recipe()
    elif args.pipeline == "timm":
        tf = timed.timm_recipe()
    elif args.pipeline == "user":
        tf = timed.user_recipe()
    elif args.pipeline == "train":
        tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                 transforms.PILToTensor()])
    else:
        tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(args.root, transform=tf)
    ids = timed.subset(len(ds), args.share, args.subset_seed)
    if ids is not None:
        ds = torch.utils.data.Subset(ds, ids.tolist())
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                         persistent_workers=args.workers > 0,
                                         prefetch_factor=args.prefetch_factor if args.workers > 0 else 2)
    timed.run(loader, args.epochs, args.sleep_ms, args.barrier)

if __name__ == "__main__":
    main()
