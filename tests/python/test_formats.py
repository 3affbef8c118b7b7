"""Every format torchvision's ImageFolder lists decodes with PIL's pixels: real photographs
(Debian's sample photos, as tests/data/make_photos.py crops them) re-encoded by PIL in each kind
of WEBP, TIFF, BMP, PPM and PGM, read through the daemon (stored at their own size) and compared
byte for byte with `Image.open(path).convert("RGB")` — what ImageFolder's loader returns."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

import joader

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "data"))
from make_photos import photos  # noqa: E402


def crops(count, rng):
    sources = photos()
    for n in range(count):
        photo = sources[n % len(sources)]
        h, w = photo.shape[:2]
        ch, cw = int(rng.integers(40, min(h, 300))), int(rng.integers(40, min(w, 300)))
        top, left = int(rng.integers(0, h - ch)), int(rng.integers(0, w - cw))
        yield Image.fromarray(photo[top:top + ch, left:left + cw])


def rgba(img):
    out = img.convert("RGBA")
    alpha = np.asarray(img.convert("L")).astype(np.uint8) // 2 + 64  # a varying alpha: it must be dropped
    out.putalpha(Image.fromarray(alpha))
    return out


def plain_pnm(img, path, kind, maxval=255):
    """A plain-text (ASCII) PNM, which PIL reads but does not write: P3 (RGB), P2 (gray) or P1
    (bits, 1 black, written without spaces), with a comment in the header and one in the data."""
    if kind == "P1":
        bits = (np.asarray(img.convert("1")) == 0).astype(int)
        rows = ["".join(map(str, row)) for row in bits]
        maxline = ""
    else:
        arr = np.asarray(img if kind == "P3" else img.convert("L")).astype(np.int64)
        arr = (arr * maxval + 127) // 255  # every value of 0..maxval occurs for small maxvals
        rows = [" ".join(map(str, row.reshape(-1))) for row in arr]
        maxline = f"{maxval}\n"
    h, w = np.asarray(img).shape[:2]
    with open(path, "w") as f:
        f.write(f"{kind}\n# written by test_formats.py\n{w} {h}\n{maxline}")
        f.write(rows[0] + "\n# a comment among the samples\n" + "\n".join(rows[1:]) + "\n")


KINDS = {  # name: (extension, how PIL writes it)
    "webp_lossy": (".webp", lambda img, p: img.save(p, quality=80)),
    "webp_lossless": (".webp", lambda img, p: img.save(p, lossless=True)),
    "webp_alpha": (".webp", lambda img, p: rgba(img).save(p, quality=85)),
    "tiff_raw": (".tif", lambda img, p: img.save(p)),
    "tiff_lzw": (".tiff", lambda img, p: img.save(p, compression="tiff_lzw")),
    "tiff_deflate": (".tif", lambda img, p: img.save(p, compression="tiff_adobe_deflate")),
    "tiff_rgba": (".tif", lambda img, p: rgba(img).save(p, compression="tiff_lzw")),
    "tiff_gray": (".tif", lambda img, p: img.convert("L").save(p)),
    "bmp_rgb": (".bmp", lambda img, p: img.save(p)),
    "bmp_gray": (".bmp", lambda img, p: img.convert("L").save(p)),
    "bmp_palette": (".bmp", lambda img, p: img.convert("P", palette=Image.ADAPTIVE, colors=50).save(p)),
    "bmp_1bit": (".bmp", lambda img, p: img.convert("1").save(p)),
    "ppm": (".ppm", lambda img, p: img.save(p)),
    "pgm": (".pgm", lambda img, p: img.convert("L").save(p)),
    "pgm16": (".pgm", lambda img, p: Image.fromarray(np.asarray(img.convert("L")).astype(np.int32) * 3,
                                                    mode="I").save(p)),
    "ppm_plain": (".ppm", lambda img, p: plain_pnm(img, p, "P3")),
    "ppm_plain_15": (".ppm", lambda img, p: plain_pnm(img, p, "P3", 15)),
    "pgm_plain_100": (".pgm", lambda img, p: plain_pnm(img, p, "P2", 100)),
    "pgm_plain_1000": (".pgm", lambda img, p: plain_pnm(img, p, "P2", 1000)),
    "pgm_plain_65535": (".pgm", lambda img, p: plain_pnm(img, p, "P2", 65535)),
    "pbm_plain": (".pgm", lambda img, p: plain_pnm(img, p, "P1")),  # ImageFolder lists no .pbm
}


def test_every_imagefolder_format_decodes_with_pils_pixels(client, workdir):
    root = os.path.join(workdir, "photos")
    rng = np.random.default_rng(5)
    paths = []
    for kind, (ext, save) in KINDS.items():
        os.makedirs(os.path.join(root, kind))
        for n, img in enumerate(crops(3, rng)):
            path = os.path.join(root, kind, f"{n}{ext}")
            save(img, path)
            paths.append(path)
    import torchvision
    samples = torchvision.datasets.ImageFolder(root).samples
    assert sorted(p for p, _ in samples) == sorted(paths), "torchvision lists every file"
    info = client.add_dataset("formats", source=f"imagefolder:{root}")
    assert info["items"] == len(samples)
    seen = {}
    for batch in joader.Loader("formats", batch_size=8, epochs=1, client=client):
        for item, image in zip(batch.indices.tolist(), batch.data):
            seen[item] = image
    assert sorted(seen) == list(range(len(samples)))
    wrong = []
    for item, (path, _) in enumerate(samples):
        expected = np.asarray(Image.open(path).convert("RGB"))
        got = seen[item]
        if got.shape != expected.shape or not np.array_equal(got, expected):
            diff = "shape" if got.shape != expected.shape else int(np.abs(got.astype(int) - expected).max())
            wrong.append(f"{os.path.relpath(path, root)}: {diff}")
    assert not wrong, "differ from PIL: " + ", ".join(wrong)


def test_gif_decodes_its_first_frame_through_its_palette_from_a_file_list(client, workdir):
    rng = np.random.default_rng(6)
    paths = []
    for n, img in enumerate(crops(4, rng)):
        path = os.path.join(workdir, f"{n}.gif")
        frames = [img.convert("P", palette=Image.ADAPTIVE, colors=32 if n % 2 else 256), img.rotate(90).convert("P")]
        frames[0].save(path, save_all=n == 3, append_images=frames[1:] if n == 3 else [], interlace=n == 1)
        paths.append(path)
    listing = os.path.join(workdir, "list.txt")
    with open(listing, "w") as f:
        f.writelines(f"{p}\t0\n" for p in paths)
    client.add_dataset("gifs", source=f"filelist:{listing}")
    for batch in joader.Loader("gifs", batch_size=4, epochs=1, client=client):
        for item, image in zip(batch.indices.tolist(), batch.data):
            np.testing.assert_array_equal(image, np.asarray(Image.open(paths[item]).convert("RGB")),
                                          err_msg=paths[item])


@pytest.mark.parametrize("data, reason", [
    (b"", "empty file"),
    (b"BM" + bytes(60), "corrupt BMP"),
    (b"P7\n2 2\n255\n0 0 0", "starts with 50 37"),  # PAM, which PIL reads but ImageFolder lists no extension of
    (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "WEBP"),
    (b"<html>", "not a JPEG, PNG, WEBP, TIFF, BMP, PPM or GIF image"),
], ids=["empty", "bmp", "pnm_kind", "webp", "html"])
def test_a_file_whose_header_cannot_be_read_is_found_when_the_dataset_is_added(client, workdir, data, reason):
    root = os.path.join(workdir, "bad")
    os.makedirs(os.path.join(root, "a"))
    Image.new("RGB", (20, 10), (1, 2, 3)).save(os.path.join(root, "a", "good.png"))
    with open(os.path.join(root, "a", "x.bmp"), "wb") as f:
        f.write(data)
    with pytest.raises(joader.JoaderError, match="1 of 2 files cannot be read as images") as e:
        client.add_dataset("bad", source=f"imagefolder:{root}")
    assert os.path.join(root, "a", "x.bmp") in str(e.value) and reason in str(e.value), e.value
    info = client.add_dataset("bad", source=f"imagefolder:{root}", on_error="skip")
    assert (info["items"], info["unreadable"], info["formats"]) == (2, 1, "PNG 1"), info
    loader = joader.Loader("bad", batch_size=2, epochs=2, client=client)
    batches = list(loader)
    assert [b.indices.tolist() for b in batches] == [[0], [0]]  # ImageFolder's order: good.png, x.bmp
    assert loader.skipped == [1]
    assert client.status()["skipped"] == 1, "the file is counted once, not once per delivery"
