"""Training pipelines through the daemon: images decoded once for every job and stored at their
own size, augmented per job and per delivery (RandomResizedCrop + RandomHorizontalFlip) in C++."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import joader
import joader.torch
from joader import _native
from conftest import BUILD

TRAIN = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()])
PHOTOS = os.path.join(os.path.dirname(__file__), "..", "data", "make_photos.py")


def crops_by_item(loader):
    """{(epoch, item): bytes of the augmented image} over a whole Loader."""
    out = {}
    for batch in loader:
        for item, image in zip(batch.indices.tolist(), batch.data):
            assert (batch.epoch, item) not in out
            out[(batch.epoch, item)] = image if isinstance(image, bytes) else image.tobytes()
    return out


def test_augmented_bytes_equal_torchvisions_for_the_drawn_parameters_on_real_photos(client, workdir):
    root = os.path.join(workdir, "photos")
    subprocess.run([sys.executable, PHOTOS, root, "--count", "24", "--min", "80", "--max", "500"], check=True,
                   capture_output=True)
    client.add_dataset("photos", source=f"imagefolder:{root}")
    samples = torchvision.datasets.ImageFolder(root).samples
    seed = 1234
    loader = joader.Loader("photos", batch_size=5, epochs=2, client=client, augment=TRAIN, augment_seed=seed)
    checked = 0
    for batch in loader:
        assert batch.data.shape == (len(batch.indices), 32, 32, 3)
        for item, image in zip(batch.indices.tolist(), batch.data):
            pil = Image.open(samples[item][0]).convert("RGB")
            w, h = pil.size
            top, left, bh, bw, flip = _native.testing.draws(w, h, 32, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, seed,
                                                            batch.epoch, item + 1)[item].tolist()
            ref = F.resized_crop(pil, top, left, bh, bw, [32, 32], T.InterpolationMode.BILINEAR)
            ref = F.pil_to_tensor(F.hflip(ref) if flip else ref).permute(1, 2, 0).numpy()
            assert np.array_equal(image, ref), (samples[item][0], batch.epoch)
            checked += 1
    assert checked == 48


def test_two_training_jobs_share_the_decode_with_independent_crops(client):
    client.add_dataset("train", source="synthetic:200:96x72")
    loaders = {name: joader.Loader("train", name=name, batch_size=8, epochs=2, client=client, augment=TRAIN)
               for name in ("a", "b")}
    assert loaders["a"].augment_seed != loaders["b"].augment_seed  # fresh seeds: independent jobs
    results = {}
    threads = [threading.Thread(target=lambda n=n, l=l: results.__setitem__(n, crops_by_item(l)))
               for n, l in loaders.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for crops in results.values():
        assert sorted(crops) == [(e, i) for e in range(2) for i in range(200)]  # exact epochs
    same = sum(results["a"][k] == results["b"][k] for k in results["a"])
    assert same < 10, f"{same} of 400 crops equal between jobs with different seeds"
    s = client.status()
    assert s["ld_ratio"] < 0.6, s  # the decode is shared
    # Fresh crops every epoch: an item's two epochs differ.
    assert sum(results["a"][(0, i)] == results["a"][(1, i)] for i in range(200)) < 10


def batches_with_copy_reads(socket, copy_reads, **loader):
    """{(epoch, item): bytes} of a Loader whose process reads the arena with
    JOADER_ARENA_COPY_READS=copy_reads (read when the job maps the arena: a new Client maps it anew)."""
    os.environ["JOADER_ARENA_COPY_READS"] = str(copy_reads)
    try:
        return crops_by_item(joader.Loader(client=joader.Client(socket), **loader))
    finally:
        del os.environ["JOADER_ARENA_COPY_READS"]


# src/ipc/arena_reads.h: where a first read of a page would trap, a job copies items with pread
# (a crop's rows only, for a pipeline starting with RandomResizedCrop) for the first reads of
# each page, then reads in place. Whichever way, and on whatever machine, the bytes are the same.
@pytest.mark.parametrize("copy_reads", [1, 255])
def test_items_copied_out_of_the_arena_are_the_bytes_read_in_place(client, daemon, workdir, copy_reads):
    root = os.path.join(workdir, "photos")
    subprocess.run([sys.executable, PHOTOS, root, "--count", "16", "--min", "80", "--max", "400"], check=True,
                   capture_output=True)
    client.add_dataset("own", source=f"imagefolder:{root}")
    client.add_dataset("crop", source=f"imagefolder:{root}", resize=64, crop=56)
    client.add_dataset("raw", source=f"imagefolder:{root}", raw=True)
    for loader in ({"dataset": "own", "augment": TRAIN, "augment_seed": 3},  # the crop's rows copied
                   {"dataset": "crop", "augment": TRAIN, "augment_seed": 3},
                   {"dataset": "crop"},  # whole items copied straight into the batch
                   {"dataset": "crop", "layout": "NCHW"},  # copied, then permuted into the batch
                   {"dataset": "own", "augment": [T.CenterCrop(48), T.RandomHorizontalFlip()], "augment_seed": 3},
                   {"dataset": "own"},  # copied into each image's array
                   {"dataset": "raw"}):
        in_place = batches_with_copy_reads(daemon.socket, 0, batch_size=5, epochs=3, **loader)
        copied = batches_with_copy_reads(daemon.socket, copy_reads, batch_size=5, epochs=3, **loader)
        assert len(in_place) == 48 and copied == in_place, loader


# src/python/native.cc, batch_array: a job writes a batch into the array of an earlier one that
# nobody holds any more (new memory for every batch cost page faults), never into one still held.
def test_a_batch_array_is_written_again_only_once_nobody_holds_it(client):
    client.add_dataset("synth", source="synthetic:40:24x20", crop=16)
    loader = {"batch_size": 4, "epochs": 3, "client": client}
    expected = {item: image for (epoch, item), image in crops_by_item(joader.Loader("synth", **loader)).items()}
    held = list(joader.Loader("synth", **loader))  # every batch kept: none may change under it
    assert len({id(b.data) for b in held}) == len(held) == 30
    for b in held:
        assert [image.tobytes() for image in b.data] == [expected[i] for i in b.indices.tolist()]
    dropped, reused = [], 0
    for b in joader.Loader("synth", **loader):  # each batch dropped once the next comes
        reused += any(w() is b.data for w in dropped)
        dropped.append(weakref.ref(b.data))
        assert [image.tobytes() for image in b.data] == [expected[i] for i in b.indices.tolist()]
    assert reused >= 25, "dropped batches' arrays are written again"
    for layout, dtype in (("NCHW", torch.uint8), ("NHWC", torch.float32)):
        kept = []
        with joader.torch.DataLoader("synth", layout=layout, dtype=dtype, **loader) as dl:
            for n, (images, labels) in enumerate(x for _ in range(3) for x in dl):
                if n % 5 == 0:
                    kept.append((images, images.clone()))  # held by the loop: never written again
        assert all(torch.equal(images, copy) for images, copy in kept)


def test_the_same_seed_gives_the_same_crops(client):
    client.add_dataset("train", source="synthetic:60:80x64")
    first = crops_by_item(joader.Loader("train", batch_size=7, epochs=2, client=client, augment=TRAIN,
                                        augment_seed=99))
    second = crops_by_item(joader.Loader("train", batch_size=4, epochs=2, client=client, augment=TRAIN,
                                         augment_seed=99))
    assert first == second


def test_a_job_resumed_after_sigkill_gets_exactly_the_remaining_crops(client, daemon, workdir):
    client.add_dataset("train", source="synthetic:50:80x64")
    reference = crops_by_item(joader.Loader("train", batch_size=5, epochs=1, client=client, augment=TRAIN,
                                            augment_seed=5))
    state_file = os.path.join(workdir, "state.json")
    script = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {os.path.join(BUILD, 'python')!r})
        import joader, torchvision.transforms as T
        loader = joader.Loader("train", batch_size=5, epochs=1, client=joader.Client({daemon.socket!r}),
                               augment=T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()]))
        seen = {{}}
        for n, batch in enumerate(loader):
            for item, image in zip(batch.indices.tolist(), batch.data):
                seen[item] = image.tobytes().hex()
            if n == 3:
                break
        json.dump({{"state": loader.state_dict(), "seen": seen}}, open({state_file!r}, "w"))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = json.load(open(state_file))
    state = saved["state"]
    assert len(state["consumed"]) == 20 and "augment_seed" in state
    # The killed job drew a fresh seed; a job given its state continues with that seed.
    reference = crops_by_item(joader.Loader("train", batch_size=5, epochs=1, client=client, augment=TRAIN,
                                            augment_seed=state["augment_seed"]))
    for item, hexed in saved["seen"].items():
        assert reference[(0, int(item))] == bytes.fromhex(hexed)
    rest = crops_by_item(joader.Loader("train", batch_size=5, epochs=1, client=client, augment=TRAIN, state=state))
    assert sorted(i for _, i in rest) == sorted(set(range(50)) - set(state["consumed"]))
    for key, crop in rest.items():
        assert crop == reference[key]


def test_data_parallel_ranks_and_epochs_draw_different_crops(client):
    client.add_dataset("train", source="synthetic:40:64x48")
    crops = {}
    for rank in range(2):
        dl = joader.torch.DataLoader("train", batch_size=5, epochs=2, client=client, rank=rank, world_size=2,
                                     augment=TRAIN, augment_seed=3, with_indices=True, layout="NHWC")
        for epoch in range(2):
            for images, _, ids in dl:
                for image, item in zip(images, ids.tolist()):
                    crops[(rank, epoch, item)] = image.numpy().tobytes()
    assert len(crops) == 2 * 2 * 20
    by_rank_epoch = {}
    for (rank, epoch, item), crop in crops.items():
        by_rank_epoch.setdefault((rank, epoch), set()).add(crop)
    assert len(set.union(*by_rank_epoch.values())) == 80  # no crop repeats across ranks or epochs


def test_augmentation_bad_input_is_refused_naming_the_field(client):
    client.add_dataset("train", source="synthetic:10:64x48")
    client.add_dataset("bytes", source="synthetic:10:64x48", raw=True)
    client.add_dataset("cropped", source="synthetic:10:64x48", crop=32)
    cases = [
        ("train", T.RandomResizedCrop(0), "RandomResizedCrop: size must be in 1..8192, not 0"),
        ("train", T.RandomResizedCrop(9000), "RandomResizedCrop: size must be in 1..8192, not 9000"),
        ("train", T.RandomResizedCrop(32, scale=(0.5, 0.2)), "scale (0.5, 0.2) must be a non-empty range"),
        ("train", T.RandomResizedCrop(32, ratio=(0, 1)), "ratio (0, 1) must be a non-empty range"),
        ("train", [], "the pipeline is empty; give augment=None"),
        ("train", [T.RandomResizedCrop(32), T.Normalize((0.5,), (0.5,))], "put ToTensor() or PILToTensor() before"),
        ("bytes", TRAIN, "augment needs a decoded dataset, and 'bytes' stores raw bytes"),
        ("bytes", [T.CenterCrop(8), T.ColorJitter(0.4)], "augment needs a decoded dataset, and 'bytes' stores raw"),
        ("train", T.CenterCrop(50), "CenterCrop(50) is larger than the smallest image 'train' stores (64×48"),
        ("cropped", T.CenterCrop(40), "CenterCrop(40) is larger than the smallest image 'cropped' stores (32×32"),
    ]
    for dataset, augment, message in cases:
        with pytest.raises(joader.JoaderError) as e:
            next(iter(joader.Loader(dataset, batch_size=2, client=client, augment=augment)))
        assert message in str(e.value) and e.value.code == 3, (augment, str(e.value))
    with pytest.raises(ValueError, match="stores images at their own size: give augment="):
        joader.torch.DataLoader("train", batch_size=2, client=client)
    assert client.status()["jobs"] == []  # nothing else disturbed
    assert len(list(joader.Loader("train", batch_size=4, client=client, augment=T.RandomResizedCrop(8)))) == 3


def test_an_image_too_large_to_store_at_its_own_size_is_refused_naming_the_file(client, workdir):
    import struct
    import zlib
    folder = os.path.join(workdir, "huge", "class0")
    os.makedirs(folder)
    chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data
                                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    with open(os.path.join(folder, "big.png"), "wb") as f:  # a header declaring 9000×9000 pixels
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 9000, 9000, 8, 2, 0, 0, 0))
                + chunk(b"IEND", b""))
    with pytest.raises(joader.JoaderError) as e:
        client.add_dataset("huge", source=f"imagefolder:{os.path.dirname(folder)}")
    assert e.value.code == 3 and "big.png) would be stored at 9000×9000 pixels" in str(e.value), str(e.value)
    assert "give the dataset a resize" in str(e.value)
    info = client.add_dataset("huge", source=f"imagefolder:{os.path.dirname(folder)}", resize=256)
    assert info["items"] == 1  # resized, it is stored at 256×256


def test_nested_composes_are_one_pipeline(client):
    client.add_dataset("train", source="synthetic:6:64x48")
    nested = T.Compose([T.RandomResizedCrop(8), T.Compose([T.RandomHorizontalFlip()])])
    assert sum(len(b.indices) for b in joader.Loader("train", batch_size=4, client=client, augment=nested)) == 6


def test_an_item_that_cannot_be_augmented_ends_the_job_without_consuming_its_batch(client):
    # Resize(8192) of a 4000×10 image would make 3 276 800 × 8192 pixels: refused when drawn.
    client.add_dataset("strips", source="synthetic:4:4000x10")
    loader = joader.Loader("strips", batch_size=2, client=client, augment=[T.Resize(8192), T.CenterCrop(8)])
    with pytest.raises(joader.JoaderError) as e:
        list(loader)
    assert e.value.code == 15 and "augment: item " in str(e.value) and "more than the limit" in str(e.value)
    assert loader.state_dict()["consumed"] == []
    # The daemon releases the job when the cancelled stream reaches it, and an item of the job
    # that a loader was still preparing when the job left once the load ends (its pin is the
    # loader's until then: 120000 bytes seen right after the job was gone).
    for _ in range(100):
        status = client.status()
        if not status["jobs"] and status["pinned_bytes"] == 0:
            break
        time.sleep(0.02)
    assert status["jobs"] == [] and status["pinned_bytes"] == 0
