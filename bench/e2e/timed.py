"""What both benchmark jobs share: the subset they read and the timed training loop."""
import json
import sys
import time

import numpy as np


def recipe():
    """torchvision's classification reference recipe with --auto-augment ta_wide --random-erase 0.1
    (references/classification/presets.py, ClassificationPresetTrain), float32 normalised: the
    pipeline of the `recipe` benchmark, the same object on both sides."""
    import torch
    from torchvision import transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(0.5),
                      T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR), T.PILToTensor(),
                      T.ConvertImageDtype(torch.float), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
                      T.RandomErasing(0.1)])


def timm_recipe():
    """timm's default training transform without auto-augment: RandomResizedCrop(224),
    RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.4), ToTensor(), Normalize(ImageNet)."""
    from torchvision import transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor(),
                      T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])


class AddNoise:
    """A user's own transform (a class with __call__(img) on a PIL image, numpy's global generator):
    what no loader has a native twin for, so Joader runs it in the job's Python pool."""

    def __call__(self, img):
        from PIL import Image
        a = np.asarray(img).astype(np.int16) + np.random.randint(-20, 21, size=(1, 1, 3))
        return Image.fromarray(a.clip(0, 255).astype(np.uint8))


def user_recipe():
    """RandomResizedCrop(224), RandomHorizontalFlip(), a user's own AddNoise, ToTensor(), Normalize:
    the `user` pipeline (Joader: crop and flip native, AddNoise in the pool, the tail fused)."""
    from torchvision import transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), AddNoise(), T.ToTensor(),
                      T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])


def subset(n, share, seed):
    """The job's item ids: a seeded random `share` of 0..n-1 (None: all), the same on both sides."""
    return None if share >= 1.0 else np.random.default_rng(seed).permutation(n)[: int(n * share)]


def run(loader, epochs, sleep_ms, barrier=False):
    """Iterates `epochs` passes ("training" = sleep_ms per batch); prints one JSON line:
    {"items", "seconds", "start", "end", "epoch_ends", "epoch_items"} on the monotonic clock, shared
    by all processes. `start` is taken before the first batch is asked for, so a DataLoader's worker
    start-up is inside the first epoch; the later epochs are the steady state. With barrier, the job
    prints "ready" once set up (imports done) and waits for a line on stdin before it starts, so
    that jobs told to start together do, and no job's imports run inside another's window."""
    if barrier:
        print("ready", flush=True)
        sys.stdin.readline()
    start = time.monotonic()
    items, epoch_ends, epoch_items = 0, [], []
    for _ in range(epochs):
        n = 0
        for _, labels in loader:
            n += len(labels)
            if sleep_ms:
                time.sleep(sleep_ms / 1000)
        items += n
        epoch_ends.append(time.monotonic())
        epoch_items.append(n)
    end = time.monotonic()
    print(json.dumps({"items": items, "seconds": end - start, "start": start, "end": end, "epoch_ends": epoch_ends,
                      "epoch_items": epoch_items}))
