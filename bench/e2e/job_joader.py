"""One Joader job: joader.torch.DataLoader on the same ImageFolder (registered in the daemon with
resize 256, crop 224 for the eval pipeline; decoded at its own size for the training pipeline,
which this job then augments per item with RandomResizedCrop(224) + RandomHorizontalFlip() on its
own augmentation threads; the recipe and timm pipelines run wholly natively too, any op Joader
runs in Python would run in the job's pool of --workers processes). Prints one JSON line:
{"items", "seconds", "start", "end"}."""
import argparse

import torch

import joader
import timed
from joader.torch import DataLoader


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--share", type=float, default=1.0)
    ap.add_argument("--subset-seed", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--pipeline", choices=["eval", "train", "recipe", "timm", "user"], default="eval")
    ap.add_argument("--workers", type=int, default=1, help="recipe: processes of the job's Python pool")
    ap.add_argument("--barrier", action="store_true", help="print 'ready', wait for a line on stdin, then start")
    args = ap.parse_args()
    torch.set_num_threads(1)
    client = joader.Client(args.socket)
    n = client.dataset("e2e")["items"]
    ids = timed.subset(n, args.share, args.subset_seed)
    augment = None
    if args.pipeline == "train":
        import torchvision.transforms as T
        augment = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    elif args.pipeline == "recipe":  # all native (TrivialAugmentWide too)
        augment = timed.recipe()
    elif args.pipeline == "timm":  # all native
        augment = timed.timm_recipe()
    elif args.pipeline == "user":  # the user's AddNoise in the pool of --workers processes
        augment = timed.user_recipe()
    loader = DataLoader("e2e", batch_size=args.batch_size, indices=ids, epochs=args.epochs, client=client,
                        augment=augment, augment_threads=1, num_workers=args.workers)
    timed.run(loader, args.epochs, args.sleep_ms, args.barrier)

if __name__ == "__main__":
    main()
