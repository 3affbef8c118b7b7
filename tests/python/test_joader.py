"""The Python package through the whole stack: real daemon, real torch."""
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import torch

import joader
import joader.torch
from conftest import BUILD, make_images


def chi_square_pvalue(counts):
    """Goodness of fit to equal cells (df = cells - 1); uses torch's regularised gamma."""
    counts = np.asarray(counts, dtype=np.float64)
    assert len(counts) > 1 and counts.sum() > 0, "an empty sample tests nothing"
    expected = counts.sum() / len(counts)
    stat = ((counts - expected) ** 2 / expected).sum()
    df = len(counts) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def run_jobs(jobs, seconds_per_batch=0.0):
    """Runs Loaders in threads (the native calls release the GIL); returns {name: [[ids] per epoch]}.
    With seconds_per_batch, each job "trains" that long on every batch, as a real job paces itself."""
    results = {}

    def consume(name, loader):
        epochs = []
        for batch in loader:
            if seconds_per_batch:
                time.sleep(seconds_per_batch)
            if batch.epoch == len(epochs):
                epochs.append([])
            epochs[batch.epoch].extend(batch.indices.tolist())
        results[name] = epochs

    threads = [threading.Thread(target=consume, args=(name, loader)) for name, loader in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


def test_three_python_jobs_get_exact_epochs(client):
    client.add_dataset("synth", source="synthetic:300:24x24", crop=16)
    subsets = {"a": range(0, 200), "b": range(100, 300), "c": range(50, 250)}
    loaders = {n: joader.Loader("synth", name=n, indices=list(s), batch_size=bs, epochs=3, client=client)
               for (n, s), bs in zip(subsets.items(), (16, 7, 32))}
    assert len(loaders["b"]) == math.ceil(200 / 7)
    results = run_jobs(loaders)
    for name, subset in subsets.items():
        assert len(results[name]) == 3
        for epoch in results[name]:
            assert sorted(epoch) == list(subset)
    status = client.status()
    assert status["loads"] < status["deliveries"]


def permutation_pvalues_through_a_daemon(workdir, sampler, policy):
    """Three jobs on 5 items with overlapping 4-item subsets, through a daemon whose samplers are
    seeded (--seed; the rounds still depend on real-time pacing); per job, the p-value of its
    per-epoch permutation frequencies against the uniform law on 24 permutations. The jobs pace
    themselves at one batch of 2 per 2 ms, as training jobs do: the coupling, which the biased
    control needs to show its bias, comes from jobs of equal speed sharing rounds. (Unpaced, each
    job drains its queue as fast as Python allows and often gets rounds of its own, so the control
    was sometimes not rejected.) Under `planned`, each job's window is one batch, so that the jobs
    decide ids beyond it: their plans (up to an epoch of 4, across epoch boundaries); under the
    other policies a window of one batch couples the jobs too weakly for the control to show."""
    from conftest import Daemon
    daemon = Daemon(workdir, name=sampler + "-" + policy,
                    extra=("--seed", "7", "--sampler", sampler, "--policy", policy))
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("tiny", source="synthetic:5:8x8", crop=8)
        subsets = {"x": [0, 1, 2, 3], "y": [1, 2, 3, 4], "z": [0, 2, 3, 4]}
        epochs = 1200
        prefetch = 1 if policy == "planned" else 4
        loaders = {n: joader.Loader("tiny", name=n, indices=s, batch_size=2, epochs=epochs, prefetch=prefetch,
                                    client=client) for n, s in subsets.items()}
        planned = []
        watching = threading.Event()

        def watch():  # the most items any job had decided beyond its window
            while not watching.is_set():
                planned.append(max([j.get("planned", 0) for j in client.status()["jobs"]] + [0]))
                time.sleep(0.01)
        watcher = threading.Thread(target=watch)
        watcher.start()
        results = run_jobs(loaders, seconds_per_batch=0.002)
        watching.set()
        watcher.join()
        assert (max(planned) > 0) == (policy == "planned"), max(planned)
        pvalues = {}
        for name, subset in subsets.items():
            perms = {p: i for i, p in enumerate(itertools.permutations(subset))}
            counts = [0] * len(perms)
            assert len(results[name]) == epochs
            for epoch in results[name]:
                assert len(epoch) == 4, epoch
                counts[perms[tuple(epoch)]] += 1
            pvalues[name] = chi_square_pvalue(counts)
        assert client.status()["loads"] < client.status()["deliveries"]
        print(sampler, policy, pvalues, client.status()["ld_ratio"])
        return pvalues
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("policy", ["refcnt", "planned"])
def test_epochs_through_the_daemon_are_uniform_permutations(workdir, policy):
    # α = 1e-4 per job, 3 jobs: a correct sampler fails with probability ≤ 3e-4 per policy.
    pvalues = permutation_pvalues_through_a_daemon(workdir, "dsa", policy)
    assert min(pvalues.values()) > 1e-4, pvalues


@pytest.mark.parametrize("policy", ["refcnt", "planned"])
def test_the_same_test_through_the_daemon_rejects_a_biased_sampler(workdir, policy):
    # The control: a DSA that always reuses its parent's item (joader serve --sampler biased-dsa).
    pvalues = permutation_pvalues_through_a_daemon(workdir, "biased-dsa", policy)
    assert min(pvalues.values()) < 1e-4, pvalues


RESUME_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import joader
    socket, state_file, stop_after = sys.argv[2], sys.argv[3], int(sys.argv[4])
    loader = joader.Loader("synth", indices=list(range(100)), batch_size=10, epochs=2,
                           client=joader.Client(socket))
    for i, batch in enumerate(loader):
        with open(state_file + ".tmp", "w") as f:
            json.dump(loader.state_dict(), f)
        import os; os.replace(state_file + ".tmp", state_file)
        print(" ".join(map(str, batch.indices.tolist())), flush=True)
        if i + 1 == stop_after:
            sys.stdout.flush()
            import time; time.sleep(3600)   # wait to be killed
""")


def test_resume_after_sigkill_receives_exactly_the_remaining_items(client, daemon, workdir):
    client.add_dataset("synth", source="synthetic:100:16x16", crop=8)
    script = os.path.join(workdir, "job.py")
    state_file = os.path.join(workdir, "state.json")
    with open(script, "w") as f:
        f.write(RESUME_SCRIPT)
    proc = subprocess.Popen([sys.executable, script, os.path.join(BUILD, "python"), daemon.socket, state_file, "4"],
                            stdout=subprocess.PIPE, text=True)
    seen = [int(i) for _ in range(4) for i in proc.stdout.readline().split()]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with open(state_file) as f:
        state = json.load(f)
    assert state["epoch"] == 0 and sorted(state["consumed"]) == sorted(seen)
    loader = joader.Loader("synth", indices=list(range(100)), batch_size=10, epochs=2, client=client, state=state)
    rest = {0: [], 1: []}
    for batch in loader:
        rest[batch.epoch].extend(batch.indices.tolist())
    assert sorted(seen + rest[0]) == list(range(100)), "epoch 0: lost or duplicated items"
    assert sorted(rest[1]) == list(range(100))


def test_data_parallel_ranks_cover_each_item_once_per_epoch(client):
    client.add_dataset("synth", source="synthetic:101:16x16", crop=8)
    indices = list(range(1, 101))  # 100 items, 2 ranks: no padding
    loaders = [joader.torch.DataLoader("synth", batch_size=8, indices=indices, epochs=2, client=client,
                                       rank=r, world_size=2, with_indices=True) for r in range(2)]
    assert len(loaders[0]) == math.ceil(50 / 8)
    got = [[[], []], [[], []]]

    def run(rank):
        for epoch in range(2):
            for _, _, ids in loaders[rank]:
                got[rank][epoch].extend(ids.tolist())

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for epoch in range(2):
        assert len(got[0][epoch]) == len(got[1][epoch]) == 50
        assert sorted(got[0][epoch] + got[1][epoch]) == indices, f"epoch {epoch}"
    assert set(got[0][0]) != set(got[0][1]), "each epoch deals a new partition"


def test_data_parallel_parts_are_padded_like_distributed_sampler():
    parts = [joader.torch.partition(5, 2, r, seed=0, epoch=0) for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == 3
    assert sorted(set(parts[0] + parts[1])) == list(range(5))
    reference = list(torch.utils.data.DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=True, seed=0))
    assert parts[1] == reference
    assert [len(joader.torch.partition(5, 2, r, 0, 0, drop_last=True)) for r in range(2)] == [2, 2]


def test_a_loader_gathers_nchw_as_the_permuted_nhwc_batch(client):
    client.add_dataset("synth", source="synthetic:20:24x20", crop=16)
    ids = list(range(20))
    nhwc = {int(i): img for b in joader.Loader("synth", indices=ids, batch_size=7, client=client)
            for i, img in zip(b.indices, b.data)}
    nchw = {int(i): img for b in joader.Loader("synth", indices=ids, batch_size=7, client=client, layout="NCHW")
            for i, img in zip(b.indices, b.data)}
    assert sorted(nhwc) == sorted(nchw) == ids
    for i in ids:
        assert nchw[i].shape == (3, 16, 16) and np.array_equal(nchw[i], nhwc[i].transpose(2, 0, 1))
    with pytest.raises(joader.JoaderError, match="layout must be 'NHWC' or 'NCHW', not 'CHW'"):
        joader.Loader("synth", client=client, layout="CHW")


def test_images_equal_torchvisions_pipeline_byte_for_byte(client, workdir):
    # The daemon decodes with libjpeg-turbo and resizes with PIL's filter reproduced in C++:
    # the tensors equal ImageFolder + Resize + CenterCrop + PILToTensor exactly.
    import torchvision
    from torchvision import transforms
    root = os.path.join(workdir, "images")
    make_images(root, classes=2, per_class=6, size="120x90")
    make_images(os.path.join(workdir, "tall"), classes=1, per_class=4, size="50x130")
    os.rename(os.path.join(workdir, "tall", "class0"), os.path.join(root, "class2"))
    client.add_dataset("imgs", source=f"imagefolder:{root}", resize=72, crop=64)
    reference = torchvision.datasets.ImageFolder(root, transform=transforms.Compose(
        [transforms.Resize(72), transforms.CenterCrop(64), transforms.PILToTensor()]))
    dl = joader.torch.DataLoader("imgs", batch_size=16, client=client, with_indices=True)
    checked = 0
    for images, labels, ids in dl:
        assert images.shape[1:] == (3, 64, 64) and images.dtype == torch.uint8
        for img, label, item in zip(images, labels, ids.tolist()):
            ref, target = reference[item]
            assert int(label) == target
            assert torch.equal(img, ref), (reference.samples[item][0], (img.int() - ref.int()).abs().max())
            checked += 1
    assert checked == len(reference) == 16


def test_a_short_training_loop_reduces_the_loss(client, workdir):
    torch.manual_seed(0)
    root = os.path.join(workdir, "learnable")
    make_images(root, classes=4, per_class=32, size="40x40", learnable=True)
    client.add_dataset("learn", source=f"imagefolder:{root}", crop=32)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                                torch.nn.Flatten(), torch.nn.Linear(128, 4))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    dl = joader.torch.DataLoader("learn", batch_size=16, epochs=6, client=client, dtype=torch.float32)
    losses = []
    for _ in range(6):
        for images, labels in dl:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert len(losses) == 6 * 8
    assert np.mean(losses[-8:]) < 0.7 * np.mean(losses[:8]), losses


def test_a_pass_interrupted_by_break_continues_where_it_stopped(client):
    client.add_dataset("synth", source="synthetic:40:16x16", crop=8)
    dl = joader.torch.DataLoader("synth", batch_size=10, epochs=2, client=client, layout="NHWC", with_indices=True)
    first = []
    for images, labels, ids in dl:
        first += ids.tolist()
        break
    state = dl.state_dict()
    assert state["epoch"] == 0 and sorted(state["consumed"]) == sorted(first) and len(first) == 10
    rest = [i for _, _, ids in dl for i in ids.tolist()]
    assert sorted(first + rest) == list(range(40))  # the rest of epoch 0: nothing lost, nothing repeated
    assert sorted(i for _, _, ids in dl for i in ids.tolist()) == list(range(40))  # epoch 1, whole
    with pytest.raises(joader.JoaderError, match="delivered all its epochs=2"):  # exhausted: said, not silent
        list(dl)


@pytest.mark.parametrize("world_size", [1, 2])
def test_a_break_right_after_an_epochs_last_batch_goes_on_with_the_next_epoch(client, world_size):
    # A generator never learns that its consumer broke out after the last batch it yielded: the
    # loader must still count that epoch as done (a data-parallel rank used to fail its next pass
    # with "this Loader has delivered all its epochs=1").
    client.add_dataset("synth", source="synthetic:40:16x16", crop=8)
    dl = joader.torch.DataLoader("synth", batch_size=10, epochs=3, client=client, layout="NHWC", with_indices=True,
                                 rank=0, world_size=world_size)
    part = 40 // world_size
    for epoch in range(3):
        got = []
        for k, (_, _, ids) in enumerate(dl):
            got += ids.tolist()
            assert len(dl) == part // 10, "a rank's len() is its part's batches, also while a pass is open"
            if k == len(dl) - 1:
                break
        assert len(got) == len(set(got)) == part, f"epoch {epoch}"
        assert dl.state_dict()["epoch"] == epoch + 1 and dl.state_dict()["consumed"] == []
    with pytest.raises(joader.JoaderError, match="this DataLoader has delivered all its epochs=3"):
        list(dl)


def test_errors_are_joader_errors_with_codes(client, workdir):
    with pytest.raises(joader.JoaderError) as e:
        next(iter(joader.Loader("nope", batch_size=4, client=client, indices=[0])))
    assert "unknown dataset 'nope'" in str(e.value) and e.value.code == 5
    with pytest.raises(joader.JoaderError, match="no Joader daemon"):
        joader.Client(os.path.join(workdir, "absent.sock"))
    with pytest.raises(ValueError, match="raw=True passes the stored bytes through"):
        client.add_dataset("x", source="synthetic:10", raw=True, crop=8)


def test_two_runs_of_the_resnet_example_train_on_one_shared_dataset(daemon, client, workdir):
    root = os.path.join(workdir, "images")
    make_images(root, classes=2, per_class=8, size="80x72")
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_resnet.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    for run in range(2):  # two processes: Python's hash() of the path differs between them
        recipe = ["--auto-augment", "ta_wide", "--random-erase", "0.1"] if run else []  # the reference recipe
        r = subprocess.run([sys.executable, example, root, "--socket", daemon.socket, "--resize", "72", "--crop",
                            "64", "--batch-size", "4", "--subset", "0.5", "--max-steps", "2", "--device", "cpu",
                            *recipe], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "stopped after 2 steps" in r.stdout
    names = [d["name"] for d in client.datasets()]
    assert names == [joader.dataset_name(f"imagefolder:{root}")], names


def test_jobs_resume_exactly_after_the_daemon_is_killed_and_restarted(workdir):
    from conftest import Daemon
    daemon = Daemon(workdir)
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("synth", source="synthetic:60:16x16", crop=8)
        # reconnect=False: the error at once, not after the default 60 s wait for the daemon to come
        # back (test_first_hour.py covers the reconnection itself).
        loader = joader.Loader("synth", batch_size=7, epochs=2, client=client, reconnect=False)
        seen = []
        for batch in loader:
            seen.extend(batch.indices.tolist())
            if len(seen) >= 21:
                break
        state = loader.state_dict()
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait()
        with pytest.raises(joader.JoaderError, match="lost the Joader daemon"):
            for _ in loader.batches():
                pass
    finally:
        daemon.stop()
    restarted = Daemon(workdir)  # cleans the stale socket and arena
    try:
        client = joader.Client(restarted.socket)  # the daemon kept the dataset registration
        rest = {0: [], 1: []}
        for batch in joader.Loader("synth", batch_size=7, epochs=2, client=client, state=state):
            rest[batch.epoch].extend(batch.indices.tolist())
        assert sorted(seen + rest[0]) == list(range(60))
        assert sorted(rest[1]) == list(range(60))
    finally:
        restarted.stop()


def test_odd_images_are_prepared_exactly_as_torchvision_does(client, workdir):
    # Grayscale, CMYK, progressive and 4:4:4 JPEGs; 16-bit, palette, gray(+alpha) and RGBA PNGs;
    # a file name with a space and a non-ASCII letter. Generated by tests/data/make_corpus.py.
    import torchvision
    from torchvision import transforms
    corpus = os.path.join(workdir, "corpus")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "data", "make_corpus.py"), corpus],
                   check=True)
    root = os.path.join(corpus, "good")
    client.add_dataset("odd", source=f"imagefolder:{root}", resize=40, crop=32)
    reference = torchvision.datasets.ImageFolder(root, transform=transforms.Compose(
        [transforms.Resize(40), transforms.CenterCrop(32), transforms.PILToTensor()]))
    checked = 0
    for images, labels, ids in joader.torch.DataLoader("odd", batch_size=4, client=client, with_indices=True):
        for img, item in zip(images, ids.tolist()):
            ref, _ = reference[item]
            assert torch.equal(img, ref), reference.samples[item][0]
            checked += 1
    assert checked == len(reference) == 9


def test_real_photos_of_every_kind_equal_torchvisions_pipeline_when_only_the_window_is_decoded(client, workdir):
    # JPEGs are decoded only where the resize window reads (rows skipped, a band of columns):
    # real photos of every kind (4:2:0/4:2:2/4:4:4, progressive, gray, CMYK, PNGs) must still
    # give torchvision's bytes, for the evaluation pipeline and for a small window.
    import torchvision
    from torchvision import transforms
    root = os.path.join(workdir, "photos")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "data", "make_photos.py"), root,
                    "--count", "40", "--min", "60", "--max", "700", "--classes", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    for name, resize, crop in (("eval", 256, 224), ("small", 64, 48)):
        client.add_dataset(name, source=f"imagefolder:{root}", resize=resize, crop=crop)
        reference = torchvision.datasets.ImageFolder(root, transform=transforms.Compose(
            [transforms.Resize(resize), transforms.CenterCrop(crop), transforms.PILToTensor()]))
        checked = 0
        for images, labels, ids in joader.torch.DataLoader(name, batch_size=8, client=client, with_indices=True):
            for img, item in zip(images, ids.tolist()):
                ref, _ = reference[item]
                assert torch.equal(img, ref), (name, reference.samples[item][0])
                checked += 1
        assert checked == len(reference) == 40


def test_bad_pngs_fail_with_a_precise_reason(client, workdir):
    corpus = os.path.join(workdir, "corpus")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "data", "make_corpus.py"), corpus],
                   check=True)
    client.add_dataset("bad", source=f"imagefolder:{os.path.join(corpus, 'bad')}", crop=32, on_error="fail")
    reasons = {0: "100000×100000 pixels, more than the limit", 1: "corrupt or truncated PNG", 2: "corrupt or truncated PNG"}
    for item, reason in reasons.items():
        with pytest.raises(joader.JoaderError) as e:
            list(joader.Loader("bad", indices=[item], batch_size=1, client=client))
        assert f"item {item} (" in str(e.value) and reason in str(e.value), str(e.value)


def test_bad_arguments_are_refused_in_python_words(client):
    client.add_dataset("synth", source="synthetic:40:16x16", crop=8)
    # An id beyond the daemon's 32-bit ids gets the daemon's own words for an id beyond the dataset.
    for make in (lambda: joader.Loader("synth", indices=[2**32], client=client),
                 lambda: joader.torch.DataLoader("synth", indices=[3, 2**64], client=client),
                 lambda: next(iter(joader.Loader("synth", indices=[40], client=client)))):
        with pytest.raises(joader.JoaderError) as e:
            make()
        assert e.value.code == 3 and str(e.value).endswith("is outside the dataset (40 items)"), str(e.value)
    for make in (lambda: client.dataset("nope"), lambda: joader.Loader("nope", client=client),
                 lambda: joader.torch.DataLoader("nope", client=client)):
        with pytest.raises(joader.JoaderError) as e:
            make()
        assert e.value.code == 5 and str(e.value) == "unknown dataset 'nope' (known: synth)"
    with pytest.raises(TypeError, match="indices must be integer item ids, not float values such as 1.5"):
        joader.Loader("synth", indices=[1.5], client=client)
    with pytest.raises(TypeError, match="batch_size must be an integer, not 2.5"):
        joader.Loader("synth", batch_size=2.5, client=client)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        joader.torch.DataLoader("synth", batch_size=2.5, world_size=2, rank=0, client=client)
    with pytest.raises(ValueError, match="world_size must be at least 1, not 0"):
        joader.torch.DataLoader("synth", world_size=0, client=client)
    with pytest.raises(ValueError, match="epochs must be at least 1, not 0"):
        joader.Loader("synth", epochs=0, client=client)
    with pytest.raises(ValueError, match="crop must be at least 1, not 0"):
        client.add_dataset("zero", source="synthetic:4", crop=0)


def test_relative_source_paths_are_taken_in_the_callers_directory(client, workdir, monkeypatch):
    make_images(os.path.join(workdir, "pictures"), classes=2, per_class=3)
    monkeypatch.chdir(workdir)  # the daemon's working directory is another one
    info = client.add_dataset("relative", source="imagefolder:pictures", crop=8)
    assert info["source"] == f"imagefolder:{workdir}/pictures" and info["items"] == 6


def test_drop_last_still_ends_every_epoch_for_passes_and_resume(client):
    client.add_dataset("ten", source="synthetic:10:16x16", crop=8)
    loader = joader.Loader("ten", batch_size=4, epochs=3, drop_last=True, client=client)
    for epoch in range(3):
        batches = list(loader.batches(until_epoch_end=True))
        assert [(b.epoch, len(b.indices)) for b in batches] == [(epoch, 4), (epoch, 4)]
        assert len(set(np.concatenate([b.indices for b in batches]).tolist())) == 8
        sd = loader.state_dict()
        assert {k: sd[k] for k in ("dataset", "epoch", "consumed")} == {"dataset": "ten", "epoch": epoch + 1, "consumed": []}
    with pytest.raises(joader.JoaderError, match="delivered all its epochs=3"):
        list(loader.batches())

    dl = joader.torch.DataLoader("ten", batch_size=4, epochs=3, drop_last=True, client=client)
    assert [len(list(dl)) for _ in range(3)] == [2, 2, 2]  # one pass, one epoch
    with pytest.raises(joader.JoaderError, match="delivered all its epochs=3"):
        list(dl)  # a fourth pass is an error, not an empty epoch

    loader = joader.Loader("ten", batch_size=4, epochs=2, drop_last=True, client=client)
    batches = iter(loader)
    first = [next(batches) for _ in range(3)]  # all of epoch 0, one batch of epoch 1
    state = loader.state_dict()
    loader.close()
    assert state["epoch"] == 1 and sorted(state["consumed"]) == sorted(first[2].indices.tolist())
    rest = list(joader.Loader("ten", batch_size=4, epochs=2, drop_last=True, client=client, state=state))
    assert [(b.epoch, len(b.indices)) for b in rest] == [(1, 4)]
    assert not set(rest[0].indices.tolist()) & set(state["consumed"])


def test_load_state_dict_restores_a_loader_in_place_even_in_the_middle_of_a_pass(client):
    client.add_dataset("twenty", source="synthetic:20:16x16", crop=8)
    loader = joader.Loader("twenty", batch_size=3, epochs=2, client=client)
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    state = loader.state_dict()
    beyond = [next(it) for _ in range(2)]  # consumed after the state: given again once it is restored
    loader.load_state_dict(state)
    assert loader.epoch == 0 and loader.state_dict()["consumed"] == state["consumed"]
    rest = list(it)  # the pass in progress goes on from the state
    epoch0 = [i for b in first + rest if b.epoch == 0 for i in b.indices.tolist()]
    epoch1 = [i for b in rest if b.epoch == 1 for i in b.indices.tolist()]
    assert sorted(epoch0) == list(range(20)) and sorted(epoch1) == list(range(20))
    assert set(i for b in beyond for i in b.indices.tolist()) <= set(epoch0[6:])
    assert loader.epoch == 2
    with pytest.raises(ValueError, match="is for dataset 'other'"):
        loader.load_state_dict(dict(state, dataset="other"))
    with pytest.raises(ValueError, match="epoch must be an integer >= 0"):
        loader.load_state_dict(dict(state, epoch=-1))
    loader.load_state_dict(dict(state, epoch=1, consumed=[]))  # a loader that had ended starts again
    assert sorted(i for b in loader for i in b.indices.tolist()) == list(range(20))
    loader.close()


def test_an_epoch_whose_last_items_are_all_skipped_still_ends(client, workdir):
    corpus = os.path.join(workdir, "corpus")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "data", "make_corpus.py"), corpus],
                   check=True)
    client.add_dataset("bad", source=f"imagefolder:{os.path.join(corpus, 'bad')}", crop=8, on_error="skip")
    loader = joader.Loader("bad", batch_size=2, epochs=2, client=client)  # its 3 items are all corrupt
    for epoch in range(2):
        assert list(loader.batches(until_epoch_end=True)) == []
        assert loader.state_dict()["epoch"] == epoch + 1
    assert client.status()["skipped"] == 3  # files, each counted once
    assert loader.skipped == [0, 1, 2], "the job is told which items it was not given"


def test_enlarged_and_noisy_images_equal_torchvisions_pipeline(client, workdir):
    # Images smaller than the target (enlarged), of odd sizes, and pure noise (the hardest case for
    # a resampler's rounding), lossless PNGs: center crops and own-size storage + Resize/CenterCrop
    # augmentation must give torchvision's bytes.
    import torchvision
    import torchvision.transforms as T
    from PIL import Image
    rng = np.random.default_rng(3)
    root = os.path.join(workdir, "odd-sizes")
    for c, sizes in enumerate([[(13, 9), (31, 17), (8, 40)], [(97, 71), (250, 60), (33, 33)]]):
        os.makedirs(os.path.join(root, f"class{c}"))
        for k, (w, h) in enumerate(sizes):
            noise = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(noise).save(os.path.join(root, f"class{c}", f"img{k}.png"))
    reference = torchvision.datasets.ImageFolder(root, transform=T.Compose([T.Resize(40), T.CenterCrop(32),
                                                                            T.PILToTensor()]))
    client.add_dataset("cropped", source=f"imagefolder:{root}", resize=40, crop=32)
    client.add_dataset("own", source=f"imagefolder:{root}")
    checked = 0
    for dataset, augment in (("cropped", None), ("own", T.Compose([T.Resize(40), T.CenterCrop(32)]))):
        dl = joader.torch.DataLoader(dataset, batch_size=4, client=client, with_indices=True, augment=augment)
        for images, _, ids in dl:
            for image, item in zip(images, ids.tolist()):
                assert torch.equal(image, reference[item][0]), (dataset, reference.samples[item][0])
                checked += 1
    assert checked == 12
