"""tar:GLOB sources: WebDataset shards indexed once with libarchive, then read by offset."""
import gzip
import io
import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import joader

PHOTOS = os.path.join(os.path.dirname(__file__), "..", "data", "make_photos.py")


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def shards(workdir):
    """Two shards of real JPEGs: (shard paths, [(member name, bytes, label)] in order)."""
    photos = os.path.join(workdir, "photos")
    subprocess.run([sys.executable, PHOTOS, photos, "--count", "9", "--min", "64", "--max", "200", "--jpeg-only",
                    "--classes", "1"], check=True, capture_output=True)
    images = [open(os.path.join(photos, "class0", f), "rb").read() for f in sorted(os.listdir(os.path.join(photos, "class0")))]
    expected, paths = [], []
    long_dir = "a-directory-name-long-enough-to-need-an-extended-header/" * 3  # > 100 bytes: pax headers
    for s, members in enumerate([range(0, 5), range(5, 9)]):
        path = os.path.join(workdir, f"train-{s:03d}.tar")
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
            for i in members:
                key = f"{long_dir}sample{i:04d}" if i == 6 else f"sample{i:04d}"
                add(tar, f"{key}.cls", f"{i % 3}\n".encode())       # label before the image
                add(tar, f"{key}.jpg", images[i])
                add(tar, f"{key}.json", b'{"note": "ignored"}')
                expected.append((f"{key}.jpg", images[i], i % 3))
            add(tar, "labels-only.cls", b"7")                         # a sample without an image
        paths.append(path)
    return paths, expected


def test_shards_are_indexed_in_order_and_read_by_offset(client, workdir, shards):
    paths, expected = shards
    info = client.add_dataset("wds", source=f"tar:{workdir}/train-*.tar", raw=True)
    assert info["items"] == len(expected) == 9
    got = {}
    for batch in joader.Loader("wds", batch_size=4, client=client):
        for item, label, data in zip(batch.indices.tolist(), batch.labels.tolist(), batch.data):
            got[item] = (data, label)
    for item, (name, data, label) in enumerate(expected):
        assert got[item] == (data, label), name
    decoded = client.add_dataset("wds-224", source=f"tar:{workdir}/train-*.tar", resize=40, crop=32)
    batch = next(iter(joader.Loader("wds-224", batch_size=9, client=client)))
    assert batch.data.shape == (9, 32, 32, 3)


def test_broken_shards_are_errors_naming_shard_and_member(client, workdir, shards):
    paths, _ = shards
    whole = open(paths[0], "rb").read()
    truncated = os.path.join(workdir, "bad", "cut-000.tar")
    os.makedirs(os.path.dirname(truncated))
    open(truncated, "wb").write(whole[: len(whole) // 2])
    with pytest.raises(joader.JoaderError) as e:
        client.add_dataset("cut", source=f"tar:{truncated}", raw=True)
    assert f"shard {truncated}" in str(e.value) and "member sample000" in str(e.value) and "truncated" in str(e.value)

    garbage = os.path.join(workdir, "bad", "garbage-000.tar")
    with tarfile.open(paths[0]) as tar:
        header = tar.getmembers()[4].offset  # the header of sample0001.jpg
    open(garbage, "wb").write(whole[:header] + b"\x5a" * 512 + whole[header + 512:])
    with pytest.raises(joader.JoaderError) as e:
        client.add_dataset("garbage", source=f"tar:{garbage}", raw=True)
    assert f"shard {garbage}: corrupt or truncated after member sample0001.cls: Damaged" in str(e.value), str(e.value)

    zipped = os.path.join(workdir, "bad", "zipped-000.tar.gz")
    open(zipped, "wb").write(gzip.compress(whole))
    with pytest.raises(joader.JoaderError) as e:
        client.add_dataset("zipped", source=f"tar:{zipped}", raw=True)
    assert "compressed (gzip)" in str(e.value) and "decompress it first" in str(e.value)

    with pytest.raises(joader.JoaderError, match="no shard matches"):
        client.add_dataset("none", source=f"tar:{workdir}/nothing-*.tar", raw=True)
