#!/usr/bin/env python3
"""Per-item cost of each op of torchvision's ta_wide + RandomErasing(0.1) reference recipe, as the
Python part of a Joader pipeline runs it (torchvision's own code on a PIL image), on 224x224
crops of real photographs; and what handing an item to a pool worker and back costs.

    make build && /usr/bin/python3 bench/recipe_ops.py [--images 200]

Prints two markdown tables (median of 5 passes over the images, ms per image, one core): the
recipe's ops in torchvision, and the native ops against torchvision's (the colour adjustments,
the tensor tail, and every op of the AutoAugment family; the native side through the testing
hooks, which also copy the image in and out)."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "data", "make_photos.py"), tmp, "--count",
                        str(args.images), "--min", "300", "--max", "800", "--jpeg-only"], check=True,
                       capture_output=True)
        paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs)
        torch.manual_seed(0)
        crop = T.RandomResizedCrop(224)
        images = [crop(Image.open(p).convert("RGB")) for p in paths]
    stages = [
        ("TrivialAugmentWide(BILINEAR)", T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR)),
        ("PILToTensor", T.PILToTensor()),
        ("ConvertImageDtype(float)", T.ConvertImageDtype(torch.float)),
        ("Normalize", T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))),
        ("RandomErasing(0.1)", T.RandomErasing(0.1)),
    ]
    inputs = images
    rows = []
    for name, op in stages:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            outs = [op(x) for x in inputs]
            times.append((time.perf_counter() - t) / len(inputs) * 1000)
        rows.append((name, statistics.median(times)))
        inputs = outs
    from joader.pool import seed_everything
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for i in range(len(images)):
            seed_everything(i)
        times.append((time.perf_counter() - t) / len(images) * 1000)
    rows.append(("seeding random, numpy, torch per item", statistics.median(times)))
    from joader.pool import PythonStage, to_batch
    batch = np.stack([np.asarray(x) for x in images[:64]])
    for kind, tail in (("uint8 images back", []), ("float32 tensors back", [T.ToTensor()])):
        stage = PythonStage([lambda x: x] + tail, num_workers=1)
        stage.collect(stage.submit(0, 0, range(64), batch))  # start the worker
        times = []
        for _ in range(5):
            t = time.perf_counter()
            ticket = stage.submit(0, 0, range(64), batch)
            to_batch(stage.collect(ticket), "NCHW", None)
            stage.release(ticket)
            times.append((time.perf_counter() - t) / 64 * 1000)
        stage.close()
        rows.append((f"pool round trip, identity op, {kind} (1 worker, batch 64)", statistics.median(times)))
    print(f"{len(images)} crops of 224x224 from {len(images)} photographs, torch {torch.__version__}")
    print("| per item | ms |\n|---|---:|")
    for name, ms in rows:
        print(f"| {name} | {ms:.3f} |")

    # The native ops against torchvision's on the same images (native: through the testing hook,
    # which also copies the image in and out).
    import torchvision.transforms.functional as F
    from joader import _native
    arrays = [np.asarray(x) for x in images]
    pairs = []
    for which, fn, factor in (("brightness", F.adjust_brightness, 1.3), ("contrast", F.adjust_contrast, 0.7),
                              ("saturation", F.adjust_saturation, 1.4), ("hue", F.adjust_hue, 0.08)):
        pairs.append((f"adjust_{which}({factor})", median_ms(lambda: [fn(x, factor) for x in images], len(images)),
                      median_ms(lambda: [_native.testing.adjust(a, which, factor) for a in arrays], len(images))))
    tensors = [T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))(T.ToTensor()(x)) for x in images]
    erase = T.RandomErasing(1.0)
    batch = np.stack(arrays)
    out = np.empty((len(arrays), 3, 224, 224), np.float32)
    spec = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    ids = list(range(len(arrays)))
    tail = median_ms(lambda: _native.convert_images(batch, out, True, spec), len(images))
    tail_erase = median_ms(lambda: _native.convert_images(batch, out, True, spec, 1, (1.0, 0.02, 0.33, 0.3, 3.3,
                                                                                      (0.0,) * 3), 1, 0, ids),
                           len(images))
    pairs.append(("RandomErasing(p=1) on a normalised tensor", median_ms(lambda: [erase(t) for t in tensors],
                                                                         len(images)), tail_erase - tail))
    pairs.append(("ToTensor + Normalize", median_ms(lambda: [T.Normalize(*spec)(T.ToTensor()(x)) for x in images],
                                                    len(images)), tail))
    # The AutoAugment family's ops (torchvision's _apply_op on the PIL image against
    # prep/autoaugment.h), bilinear, at a middle magnitude of TrivialAugmentWide's space.
    from torchvision.transforms.autoaugment import _apply_op
    from joader.augment import IMAGE_OPS
    space = T.TrivialAugmentWide()._augmentation_space(31)
    bilinear = T.InterpolationMode.BILINEAR
    for code, name in enumerate(IMAGE_OPS):
        if name == "Identity":
            continue
        magnitudes = space[name][0] if name in space else None
        magnitude = float(magnitudes[15]) if magnitudes is not None and magnitudes.ndim > 0 else 0.0
        pairs.append((f"{name}({magnitude:g})",
                      median_ms(lambda: [_apply_op(x, name, magnitude, bilinear, None) for x in images], len(images)),
                      median_ms(lambda: [_native.testing.image_op(a, code, magnitude, 2, (0, 0, 0)) for a in arrays],
                                len(images))))
    print("\n| op, per 224x224 image | torchvision ms | Joader native ms | ratio |\n|---|---:|---:|---:|")
    for name, theirs, ours in pairs:
        print(f"| {name} | {theirs:.3f} | {ours:.3f} | {theirs / ours:.1f}× |")


def median_ms(fn, n):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) / n * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    main()
