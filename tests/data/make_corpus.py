#!/usr/bin/env python3
"""Generates the odd-image corpus for the tests (no binary files are checked in).

    /usr/bin/python3 tests/data/make_corpus.py DIR

DIR/good/<kind>/*: images PIL reads that Joader must prepare exactly as torchvision does:
grayscale, CMYK and progressive JPEGs, 4:4:4 chroma, 16-bit, palette (with transparency), gray,
gray+alpha and RGBA PNGs, a name with spaces and non-ASCII characters.
DIR/bad/class0/*: files that must fail with a precise reason: a PNG header declaring
100000×100000 pixels, a truncated PNG, a PNG with a broken checksum.
"""
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image


def pattern(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 127 // max(w + h, 1))], -1)
    noise = rng.integers(0, 40, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def main():
    root = sys.argv[1]
    good = lambda kind: os.makedirs(os.path.join(root, "good", kind), exist_ok=True) or os.path.join(root, "good", kind)
    rgb = Image.fromarray(pattern(97, 71, 1))
    rgb.convert("L").save(os.path.join(good("gray_jpeg"), "gray.jpg"), quality=90)
    rgb.convert("CMYK").save(os.path.join(good("cmyk_jpeg"), "cmyk.jpg"), quality=90)
    rgb.save(os.path.join(good("progressive_jpeg"), "progressive.jpg"), quality=85, progressive=True)
    rgb.save(os.path.join(good("jpeg_444"), "full chroma ü.jpg"), quality=95, subsampling=0)
    Image.fromarray((pattern(64, 80, 2).astype(np.uint16) * 257)[:, :, 0], "I;16").save(
        os.path.join(good("png16_gray"), "deep.png"))
    pal = rgb.convert("P", palette=Image.ADAPTIVE, colors=16)
    pal.info["transparency"] = 3
    pal.save(os.path.join(good("png_palette"), "palette.png"), transparency=3)
    rgb.convert("LA").save(os.path.join(good("png_gray_alpha"), "la.png"))
    rgba = rgb.convert("RGBA")
    rgba.putalpha(128)
    rgba.save(os.path.join(good("png_rgba"), "rgba.png"))
    rgb.convert("L").save(os.path.join(good("png_gray"), "gray.png"))

    bad = os.path.join(root, "bad", "class0")
    os.makedirs(bad, exist_ok=True)
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
    idat = png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
    with open(os.path.join(bad, "a_bomb.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + ihdr + idat + png_chunk(b"IEND", b""))
    whole = open(os.path.join(good("png_gray"), "gray.png"), "rb").read()
    with open(os.path.join(bad, "b_truncated.png"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    broken = bytearray(whole)
    broken[40] ^= 0xFF  # inside the first chunk after IHDR: a CRC or data error
    with open(os.path.join(bad, "c_checksum.png"), "wb") as f:
        f.write(bytes(broken))


if __name__ == "__main__":
    main()
