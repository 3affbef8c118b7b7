#!/usr/bin/env python3
"""Generates an ImageFolder of real photographs for tests and benchmarks (no binary files are
checked in): random crops of the photos Debian packages ship — matplotlib's grace_hopper.jpg and
scipy's face() and ascent() — rescaled and re-encoded in many JPEG and PNG kinds.

    /usr/bin/python3 tests/data/make_photos.py DIR [--count N] [--min 200] [--max 1200] [--seed 0]
                                                   [--classes 4] [--jpeg-only]

Every image is a crop at a random position and scale, resized so that its longer side lies in
[min, max] pixels, then written as one of: baseline JPEG 4:2:0 / 4:2:2 / 4:4:4, progressive JPEG,
grayscale JPEG, CMYK JPEG (qualities 60-98), or RGB / grayscale / RGBA / palette PNG. The output
is a deterministic function of the arguments. Real photos decode with other costs and entropy than
synthetic gradients, and their odd kinds (CMYK, progressive) take other decoder paths.
"""
import argparse
import os
import warnings

import numpy as np
from PIL import Image

GRACE = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"


def photos():
    out = [np.asarray(Image.open(GRACE).convert("RGB"))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import scipy.misc
            out.append(np.asarray(scipy.misc.face(), dtype=np.uint8))
            gray = np.asarray(scipy.misc.ascent(), dtype=np.uint8)
            out.append(np.stack([gray] * 3, -1))
    except Exception:  # scipy missing or without its bundled images: grace_hopper alone
        pass
    return out


JPEG_KINDS = ["jpeg420", "jpeg422", "jpeg444", "progressive", "gray_jpeg", "cmyk_jpeg"]
PNG_KINDS = ["png_rgb", "png_gray", "png_rgba", "png_palette"]


def save(img, path_base, kind, quality):
    if kind.startswith("png"):
        path = path_base + ".png"
        if kind == "png_gray":
            img = img.convert("L")
        elif kind == "png_rgba":
            img = img.convert("RGBA")
            img.putalpha(200)
        elif kind == "png_palette":
            img = img.convert("P", palette=Image.ADAPTIVE, colors=64)
        img.save(path)
        return path
    path = path_base + ".jpg"
    if kind == "gray_jpeg":
        img.convert("L").save(path, quality=quality)
    elif kind == "cmyk_jpeg":
        img.convert("CMYK").save(path, quality=quality)
    elif kind == "progressive":
        img.save(path, quality=quality, progressive=True)
    else:
        img.save(path, quality=quality, subsampling={"jpeg444": 0, "jpeg422": 1, "jpeg420": 2}[kind])
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--min", type=int, default=200, help="smallest longer side, pixels")
    p.add_argument("--max", type=int, default=1200, help="largest longer side, pixels")
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jpeg-only", action="store_true")
    a = p.parse_args()
    if a.count < 1 or a.classes < 1 or not 8 <= a.min <= a.max:
        p.error("need --count >= 1, --classes >= 1 and 8 <= --min <= --max")
    rng = np.random.default_rng(a.seed)
    sources = photos()
    kinds = JPEG_KINDS if a.jpeg_only else JPEG_KINDS + PNG_KINDS
    for c in range(a.classes):
        os.makedirs(os.path.join(a.dir, f"class{c}"), exist_ok=True)
    for i in range(a.count):
        src = sources[i % len(sources)]
        h, w = src.shape[:2]
        # A crop of 30-100 % of each side at a random place, then a resize to the target size.
        ch, cw = int(h * rng.uniform(0.3, 1.0)), int(w * rng.uniform(0.3, 1.0))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = Image.fromarray(src[y:y + ch, x:x + cw])
        longer = int(rng.integers(a.min, a.max + 1))
        scale = longer / max(ch, cw)
        size = (max(8, round(cw * scale)), max(8, round(ch * scale)))
        img = crop.resize(size, Image.BICUBIC)
        kind = kinds[int(rng.integers(0, len(kinds)))]
        quality = int(rng.integers(60, 99))
        save(img, os.path.join(a.dir, f"class{i % a.classes}", f"img{i:05d}_{kind}"), kind, quality)
        if (i + 1) % 100 == 0 or i + 1 == a.count:
            print(f"\r{i + 1}/{a.count} photos", end="", flush=True)
    print()


if __name__ == "__main__":
    main()
