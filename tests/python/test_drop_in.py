"""A stock torch script changes one import: dataset objects, torch's samplers, a daemon nobody
started (issue 38)."""
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch
import torchvision.transforms as T
from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler, Subset, SubsetRandomSampler,
                              WeightedRandomSampler)
from torchvision import datasets
from torchvision.datasets.folder import DatasetFolder

from conftest import BUILD, JOADER, Daemon, photo_imagefolder

import joader
import joader.torch

EVAL = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """14 real photos of several kinds, 60..700 px, in two classes."""
    return photo_imagefolder(tmp_path_factory.mktemp("photos"), 14, 60, 700)


def one_epoch(loader):
    ids, images, labels = [], [], []
    for x, y, i in loader:
        images += list(x)
        labels += y.tolist()
        ids += i.tolist()
    return ids, images, labels


def test_an_imagefolder_subset_gives_torchs_items_its_target_transform_and_len(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL, target_transform=lambda y: 10 + y)
    fold = Subset(Subset(ds, list(range(1, 13))), [0, 2, 4, 6, 8, 9, 11])  # base ids 1 3 5 7 9 10 12
    loader = joader.torch.DataLoader(fold, batch_size=3, client=client, with_indices=True)
    assert loader.dataset is fold and len(loader.dataset) == 7
    assert len(loader) == 3
    ids, images, labels = one_epoch(loader)
    assert sorted(ids) == [1, 3, 5, 7, 9, 10, 12]
    for i, image, label in zip(ids, images, labels):
        expected, target = ds[i]
        assert label == target == 10 + ds.targets[i]
        assert torch.equal(image, expected), f"item {i} ({ds.samples[i][0]}) differs from torchvision's"
    # A second object on the same folder is the same dataset: one registration for a sweep.
    again = joader.torch.DataLoader(datasets.ImageFolder(photos, transform=EVAL), batch_size=7, client=client)
    assert len(list(again)) == 2
    assert len(client.datasets()) == 1


def test_a_datasetfolder_is_served_with_its_own_classes_and_extensions(client, photos):
    ds = DatasetFolder(photos, loader=datasets.folder.default_loader, extensions=(".png",), transform=EVAL)
    loader = joader.torch.DataLoader(ds, batch_size=4, client=client, with_indices=True)
    ids, _, labels = one_epoch(loader)
    assert sorted(ids) == list(range(len(ds)))
    assert labels == [ds.targets[i] for i in ids]


class Custom(torch.utils.data.Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return torch.zeros(3), i


class OwnItems(datasets.ImageFolder):
    def __getitem__(self, i):
        return super().__getitem__(i)[0], 0


def test_a_dataset_joader_cannot_reproduce_is_refused_saying_what_is_accepted(client, photos):
    def own_loader(path):
        return datasets.folder.pil_loader(path).rotate(90)

    cases = [(Custom(), "Custom is none of these"),
             (OwnItems(photos, transform=EVAL), "OwnItems has its own __getitem__"),
             (datasets.ImageFolder(photos, transform=EVAL, loader=own_loader), "reads its files with 'own_loader'")]
    for dataset, says in cases:
        with pytest.raises(TypeError) as e:
            joader.torch.DataLoader(dataset, batch_size=2, client=client)
        assert says in str(e.value) and "ImageFolder" in str(e.value)
    with pytest.raises(ValueError, match="no transform"):
        joader.torch.DataLoader(datasets.ImageFolder(photos), batch_size=2, client=client)
    with pytest.raises(ValueError, match="augment= would be a second one"):
        joader.torch.DataLoader(datasets.ImageFolder(photos, transform=EVAL), augment=EVAL, client=client)


def test_distributed_sampler_ranks_get_torchs_parts_and_follow_set_epoch(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    samplers = [DistributedSampler(ds, num_replicas=3, rank=r, seed=7) for r in range(3)]
    loaders = [joader.torch.DataLoader(ds, batch_size=2, sampler=s, client=client, with_indices=True) for s in samplers]
    torch_len = len(torch.utils.data.DataLoader(ds, batch_size=2, sampler=samplers[0]))
    assert [len(dl) for dl in loaders] == [torch_len] * 3
    parts_seen = []
    for epoch in (0, 1, 1, 4):  # the same epoch twice gives the same parts, as torch's sampler does
        parts = []
        for s, dl in zip(samplers, loaders):
            s.set_epoch(epoch)
            ids = one_epoch(dl)[0]
            assert sorted(ids) == sorted(iter(s)), f"rank {s.rank}, epoch {epoch}: not the sampler's part"
            parts.append(sorted(ids))
        assert set(i for p in parts for i in p) == set(range(len(ds)))  # 14 items, 15 places: one twice
        parts_seen.append(parts)
    assert parts_seen[1] == parts_seen[2] and parts_seen[0] != parts_seen[3]


def test_torchs_other_samplers_mean_what_they_mean_in_torch_or_are_refused(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    fold = joader.torch.DataLoader(ds, batch_size=4, sampler=SubsetRandomSampler([0, 5, 6]), client=client,
                                   with_indices=True)
    assert sorted(one_epoch(fold)[0]) == [0, 5, 6]
    shuffled = joader.torch.DataLoader(ds, batch_size=4, sampler=RandomSampler(ds), client=client, with_indices=True)
    assert sorted(one_epoch(shuffled)[0]) == list(range(len(ds)))
    refused = [(dict(sampler=RandomSampler(ds, replacement=True)), "replacement=True"),
               (dict(sampler=WeightedRandomSampler([1.0] * len(ds), 4)), "sampler=WeightedRandomSampler is not"),
               (dict(sampler=RandomSampler(ds), shuffle=True), "mutually exclusive with shuffle")]
    for kwargs, says in refused:
        with pytest.raises(ValueError, match=says):
            joader.torch.DataLoader(ds, batch_size=4, client=client, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch's CPU-only behaviour")
def test_pin_memory_without_cuda_says_nothing_as_torch(client, photos):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = joader.torch.DataLoader(datasets.ImageFolder(photos, transform=EVAL), batch_size=14, pin_memory=True,
                                         client=client)
        assert next(iter(loader))[0].shape == (14, 3, 32, 32)


def batches_of(loader):
    return [(x, y) for x, y in loader]


def test_shuffle_false_and_its_default_give_torchs_very_batches_in_the_datasets_order(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    fold = Subset(ds, [9, 3, 12, 0, 5, 7, 1])
    for dataset, kwargs in ((ds, {}), (ds, dict(shuffle=False)), (fold, dict(sampler=SequentialSampler(fold)))):
        expected = batches_of(torch.utils.data.DataLoader(dataset, batch_size=3, **kwargs))
        loader = joader.torch.DataLoader(dataset, batch_size=3, client=client, **kwargs)
        for epoch in range(2):
            got = batches_of(loader)
            assert len(got) == len(expected) == len(loader)
            for (x, y), (tx, ty) in zip(got, expected):
                assert torch.equal(y, ty) and torch.equal(x, tx)
        loader.close()
    # Beside a random job on the same items, the ordered one keeps its order and shares the cache.
    random = joader.torch.DataLoader(ds, batch_size=2, shuffle=True, client=client, with_indices=True)
    ordered = joader.torch.DataLoader(ds, batch_size=2, client=client, with_indices=True)
    for epoch in range(3):
        assert [int(i) for _, _, ids in ordered for i in ids] == list(range(len(ds)))
        assert sorted(int(i) for _, _, ids in random for i in ids) == list(range(len(ds)))
    assert [j["ordered"] for j in client.status()["jobs"]] in ([False, True], [True, False])


def test_an_ordered_job_resumed_from_its_state_continues_in_order(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    loader = joader.torch.DataLoader(ds, batch_size=3, client=client, with_indices=True)
    it = iter(loader)
    first = [int(i) for _ in range(2) for i in next(it)[2]]
    state = loader.state_dict()
    loader.close()
    again = joader.torch.DataLoader(ds, batch_size=3, client=client, with_indices=True, state=state)
    rest = [int(i) for _, _, ids in again for i in ids]
    assert first + rest == list(range(len(ds)))
    assert [int(i) for _, _, ids in again for i in ids] == list(range(len(ds)))


def test_distributed_sampler_without_shuffle_gives_each_rank_torchs_sequence(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    for r in range(3):
        sampler = DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False)
        loader = joader.torch.DataLoader(ds, batch_size=2, sampler=sampler, client=client, with_indices=True)
        assert [int(i) for _, _, ids in loader for i in ids] == list(iter(sampler))
        loader.close()


# ---- a daemon nobody started ----

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {python!r})
    import torchvision.transforms as T
    from torchvision import datasets
    from joader.torch import DataLoader
    ds = datasets.ImageFolder({photos!r}, transform=T.Compose([T.RandomResizedCrop(24), T.ToTensor()]))
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=0, drop_last=True)
    for epoch in range(2):
        n = sum(len(y) for x, y in loader)
        assert n == len(ds) // 4 * 4, n
    print("ok", len(loader))
""")


def auto_env(workdir, **extra):
    env = dict(os.environ, JOADER_SOCKET=os.path.join(workdir, "j.sock"), JOADER_BIN=JOADER)
    env.pop("JOADER_AUTOSTART", None)
    env.update({"JOADER_CACHE_SIZE": "64MiB", **extra})
    return env


@pytest.fixture
def autostart_dir(workdir):
    """A private folder for a daemon the loaders start; whatever daemon serves there at the end is
    stopped."""
    yield workdir
    joader_cli("stop", env=auto_env(workdir))


def joader_cli(*args, env):
    return subprocess.run([JOADER, *args], capture_output=True, text=True, env=env, timeout=120)


def shm_arenas(pid):
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"joader-{os.getuid()}-{pid}-")]


def test_concurrent_first_loaders_start_exactly_one_daemon_and_joader_stop_leaves_nothing(autostart_dir, photos):
    env = auto_env(autostart_dir)
    script = SCRIPT.format(python=os.path.join(BUILD, "python"), photos=photos)
    jobs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(3)]
    results = [(p.wait(timeout=240), *p.communicate()) for p in jobs]
    for code, out, err in results:
        assert code == 0 and out.strip() == "ok 3", err
    started = [line for _, _, err in results for line in err.splitlines() if "joader: started a daemon" in line]
    assert len(started) == 1, started
    assert f"log {autostart_dir}/j.log" in started[0]
    status = json.loads(joader_cli("status", "--json", env=env).stdout)
    pid = status["pid"]
    assert f"pid {pid}," in started[0] and status["jobs_opened"] == 3 and status["jobs"] == []
    assert shm_arenas(pid)
    stop = joader_cli("stop", env=env)
    assert stop.returncode == 0 and f"(pid {pid})" in stop.stdout, stop.stderr
    assert not os.path.exists(env["JOADER_SOCKET"]) and shm_arenas(pid) == []
    again = joader_cli("stop", env=env)
    assert again.returncode == 0 and "nothing to stop" in again.stdout


def test_a_started_daemon_exits_after_its_idle_time_and_the_next_loader_starts_another(autostart_dir, photos):
    env = auto_env(autostart_dir, JOADER_IDLE_EXIT="1")
    script = SCRIPT.format(python=os.path.join(BUILD, "python"), photos=photos)
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
        assert run.returncode == 0 and "joader: started a daemon" in run.stderr, run.stderr
        deadline = time.monotonic() + 60
        while os.path.exists(env["JOADER_SOCKET"]):
            assert time.monotonic() < deadline, "the idle daemon did not exit"
            time.sleep(0.1)
    with open(os.path.join(autostart_dir, "j.log")) as f:
        assert f.read().count("no job for 1 s (--idle-exit), shutting down") == 2


def test_a_started_daemon_that_exits_while_its_starter_lives_is_reaped_not_left_a_zombie(autostart_dir, photos):
    env = auto_env(autostart_dir, JOADER_IDLE_EXIT="1")
    script = SCRIPT.format(python=os.path.join(BUILD, "python"), photos=photos) + textwrap.dedent("""
        import os, time
        import joader
        pid = joader.Client().status()["pid"]
        loader.close()  # its job: the daemon exits once it has none
        deadline = time.monotonic() + 60
        while os.path.exists(os.environ["JOADER_SOCKET"]):  # its idle exit, 1 s after the loader's job
            assert time.monotonic() < deadline, "the idle daemon did not exit"
            time.sleep(0.05)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}"):
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            assert time.monotonic() < deadline, f"the daemon {pid} is still there, state {state}"
            time.sleep(0.05)
        print("reaped")
    """)
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0 and run.stdout.split()[-1] == "reaped", run.stdout + run.stderr


def test_a_started_daemon_told_of_a_disk_cache_keeps_the_items_there_and_the_next_one_reads_them_back(
        autostart_dir, photos):
    disk = os.path.join(autostart_dir, "disk")
    env = auto_env(autostart_dir, JOADER_DISK_CACHE=disk)
    script = SCRIPT.format(python=os.path.join(BUILD, "python"), photos=photos)
    for run in range(2):
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0 and "joader: started a daemon" in r.stderr, r.stderr
        deadline = time.monotonic() + 30
        while True:
            status = json.loads(joader_cli("status", "--json", env=env).stdout)
            kept = status["disk_cache"]
            if kept["queued_bytes"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert kept["dir"] == disk and kept["items"] == 14, kept  # the photos, each decoded once
        if run == 0:
            assert status["disk_reads"] == 0 and kept["written"] == kept["items"], status
        else:  # a new daemon: every item read back, none decoded
            assert status["disk_reads"] == status["loads"] == kept["items"] and kept["written"] == 0, status
        assert joader_cli("stop", env=env).returncode == 0


def test_a_daemon_that_cannot_start_is_an_error_quoting_its_log(autostart_dir, photos):
    script = SCRIPT.format(python=os.path.join(BUILD, "python"), photos=photos)
    run = subprocess.run([sys.executable, "-c", script], env=auto_env(autostart_dir, JOADER_CACHE_SIZE="lots"),
                         capture_output=True, text=True, timeout=240)
    assert run.returncode != 0
    assert "one could not be started" in run.stderr and "--cache-size: 'lots' is not a size" in run.stderr
    off = subprocess.run([sys.executable, "-c", script], env=auto_env(autostart_dir, JOADER_AUTOSTART="0"),
                         capture_output=True, text=True, timeout=240)
    assert off.returncode != 0 and "no Joader daemon at" in off.stderr and "could not be started" not in off.stderr


def test_a_loader_paused_for_a_val_pass_gives_its_room_to_the_val_loader_and_gets_it_back(workdir):
    # One process, a train loader and a val loader, as every training script: the train loader is
    # idle while the val pass runs. Its window (4 batches of 8 items of 12 KiB) and a val batch of
    # 20 items do not fit in the cache together; the 2 batches it was sent and the val batch do.
    # The items decided for it stay decided (its epoch stays exact) but give back their room.
    daemon = Daemon(workdir, cache_size="576KiB")
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("own", source="synthetic:200:64x64")
        train = joader.Loader("own", name="train", indices=range(100), batch_size=8, prefetch=4, epochs=2,
                              client=client)
        val = joader.Loader("own", name="val", indices=range(100, 200), batch_size=20, epochs=None, shuffle=False,
                            client=client)
        seen = []
        batches = iter(train)
        for rounds in range(4):
            for _ in range(3):
                seen += next(batches).indices.tolist()
                time.sleep(0.1)  # a training step
            if rounds == 0:  # the train loader's whole window is decided and loaded before the val pass
                deadline = time.monotonic() + 20
                while [j["queued"] for j in client.status()["jobs"] if j["name"] == "train"] != [32]:
                    assert time.monotonic() < deadline, "the train loader's window (32 items) did not fill"
                    time.sleep(0.02)
            started = time.monotonic()
            ids = [i for b in val.batches(until_epoch_end=True) for i in b.indices.tolist()]
            assert ids == list(range(100, 200)), "the val pass, in order"
            assert time.monotonic() - started < 8, "the val job waited for room instead of being given it"
        seen += [i for b in batches for i in b.indices.tolist()]
        assert sorted(seen) == sorted(list(range(100)) * 2), "the paused job's two epochs are exact"
        val.close()
    finally:
        daemon.stop()


TRIAL = textwrap.dedent("""
    import sys
    sys.path.insert(0, {python!r})
    import torch
    import torchvision.transforms as T
    from torch.utils.data import Subset
    from torchvision import datasets
    from joader.torch import DataLoader

    recipe = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.TrivialAugmentWide(), T.ToTensor(),
                        T.RandomErasing(0.25)])
    train = datasets.ImageFolder({photos!r}, transform=recipe)
    val = datasets.ImageFolder({photos!r}, transform=T.Compose([T.Resize(72), T.CenterCrop(64), T.ToTensor()]))
    fold = Subset(train, [i for i in range(len(train)) if i % {jobs} != {job}])
    loader = DataLoader(fold, batch_size=3, shuffle=True, num_workers=2, drop_last=True, persistent_workers=True)
    val_loader = DataLoader(val, batch_size=4)
    for epoch in range(2):
        n = sum(1 for x, y in loader)
        assert n == len(loader) == len(fold) // 3, (n, len(loader))
        labels = [int(t) for x, y in val_loader for t in y]
        assert labels == val.targets, "val in ImageFolder's order"
    print("ok")
""")


def test_the_trials_sweep_of_large_photos_runs_with_default_settings(workdir, tmp_path):
    # Issue 38's trial: four processes at once, each alternating a train loader (a crop, flip and
    # TrivialAugmentWide recipe, RandomErasing) and a val loader, on photos up to 2500x8800, with
    # nothing set: the first loader starts the daemon with its default cache.
    photos = photo_imagefolder(tmp_path, 10, 300, 8800)
    env = auto_env(workdir)
    env.pop("JOADER_CACHE_SIZE")
    try:
        jobs = [subprocess.Popen([sys.executable, "-c", TRIAL.format(python=os.path.join(BUILD, "python"), photos=photos,
                                                                     jobs=4, job=n)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(4)]
        results = [(p.wait(timeout=600), *p.communicate()) for p in jobs]
        for code, out, err in results:
            assert code == 0 and out.strip() == "ok", err[-3000:]
        started = [line for _, _, err in results for line in err.splitlines() if "joader: started a daemon" in line]
        assert len(started) == 1, started
        status = json.loads(joader_cli("status", "--json", env=env).stdout)
        assert status["jobs_opened"] >= 8 and status["jobs"] == []
        with open(os.path.join(workdir, "j.log")) as f:
            assert "by default: " in f.read()
    finally:
        stop = joader_cli("stop", env=env)
    assert stop.returncode == 0, stop.stderr
    assert shm_arenas(status["pid"]) == [], "joader stop leaves nothing in /dev/shm"


def test_a_shuffled_job_alone_on_a_seeded_daemon_has_the_same_order_in_every_run(workdir):
    orders = []
    for run in range(2):
        daemon = Daemon(workdir, extra=("--seed", "5"))
        try:
            client = joader.Client(daemon.socket)
            client.add_dataset("own", source="synthetic:50:16x16", crop=8)
            loader = joader.Loader("own", batch_size=7, epochs=2, client=client)
            orders.append([i for b in loader for i in b.indices.tolist()])
        finally:
            daemon.stop()
    assert sorted(orders[0][:50]) == list(range(50)) and orders[0][:50] != list(range(50))
    assert orders[0] == orders[1]


def test_a_loaders_client_that_loses_its_daemon_while_setting_up_starts_one_again(autostart_dir):
    # A job that starts just as the daemon dies: its set-up calls (the dataset's registration, a
    # lookup) start a daemon again, as its batches would reconnect, instead of failing.
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {os.path.join(BUILD, "python")!r})
        import joader
        client = joader.Client(start=True)
        first = client.status()["pid"]
        os.kill(first, signal.SIGKILL)
        while os.path.exists(f"/proc/{{first}}"):  # gone once the loader's reaper thread has waited for it
            time.sleep(0.01)
        print(client.datasets() == [], client.status()["pid"] != first)
    """)
    run = subprocess.run([sys.executable, "-c", script], env=auto_env(autostart_dir), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and run.stdout.split() == ["True", "True"], run.stderr


# ---- load_state_dict: restoring in place, as checkpointers expect ----

class Posterize:
    """A user's own transform: runs in the Python pool's workers."""

    def __call__(self, img):
        return img.point(lambda v: v & 0xF0)


def test_load_state_dict_restores_a_dataloader_in_place_as_state_does_also_with_batches_in_flight(client, photos):
    recipe = T.Compose([T.RandomResizedCrop(24), Posterize(), T.ToTensor()])
    ds = datasets.ImageFolder(photos, transform=recipe)
    loader = joader.torch.DataLoader(ds, batch_size=2, client=client, with_indices=True, num_workers=1,
                                     augment_seed=11)
    it = iter(loader)
    first = [next(it)]
    state = loader.state_dict()
    next(it), next(it)  # consumed after the state, and more batches in the workers' hands
    loader.load_state_dict(state)
    restored = list(loader)  # a new pass: the rest of the state's epoch
    fresh = joader.torch.DataLoader(ds, batch_size=2, client=client, with_indices=True, num_workers=1, state=state)
    expected = list(fresh)
    fresh.close()
    ids = [int(i) for _, _, batch in first + restored for i in batch]
    assert ids == list(range(len(ds)))  # torch's order for a dataset object: exactly once each, in order
    assert [b[2].tolist() for b in restored] == [b[2].tolist() for b in expected]
    for (x, _, _), (want, _, _) in zip(restored, expected):
        assert torch.equal(x, want)  # the same crops: the state's augment_seed
    assert len(list(loader)) == len(loader)  # and the next epoch is whole
    loader.close()


def test_load_state_dict_refuses_what_is_not_this_jobs_state_and_changes_nothing(client, photos):
    ds = datasets.ImageFolder(photos, transform=EVAL)
    loader = joader.torch.DataLoader(ds, batch_size=5, client=client, with_indices=True)
    it = iter(loader)
    first = next(it)[2].tolist()
    with pytest.raises(ValueError, match="has no 'consumed'"):
        loader.load_state_dict({"epoch": 0})
    with pytest.raises(TypeError, match="must be the dict a DataLoader's state_dict"):
        loader.load_state_dict([0, []])
    with pytest.raises(ValueError, match="is for dataset 'another'"):
        loader.load_state_dict(dict(loader.state_dict(), dataset="another"))
    with pytest.raises(ValueError, match="files changed"):
        loader.load_state_dict(dict(loader.state_dict(), fingerprint="0123456789abcdef"))
    rest = [int(i) for _, _, ids in it for i in ids]  # the pass goes on as if nothing was asked
    assert first + rest == list(range(len(ds)))
    loader.close()


def test_a_rank_that_breaks_out_of_an_epoch_and_sets_the_next_gets_it_whole_with_batches_in_flight(client, photos):
    # The abandoned epoch's batches still in the Python workers' hands must not reach the next one's.
    ds = datasets.ImageFolder(photos, transform=T.Compose([T.Resize(40), T.CenterCrop(32), Posterize(), T.ToTensor()]))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, seed=5)
    loader = joader.torch.DataLoader(ds, batch_size=2, sampler=sampler, client=client, with_indices=True,
                                     num_workers=1)
    for _ in loader:
        break
    sampler.set_epoch(1)
    assert sorted(int(i) for _, _, ids in loader for i in ids) == sorted(iter(sampler))  # its part, in Joader's order
    loader.close()
