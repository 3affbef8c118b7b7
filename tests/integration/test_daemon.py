"""The daemon end to end: real `joader serve`, real client processes, real shared memory."""
import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import JOADER, Daemon, StatusWatch, error_time, make_images, received

SYNTH = "synthetic:400:48x40"


def add_synthetic(daemon, name="synth", source=SYNTH):
    daemon.cli("dataset", "add", name, "--source", source, "--resize", "36", "--crop", "32")


def expect_exact_epochs(epochs, subset, count):
    assert sorted(epochs) == list(range(count)), f"epochs {sorted(epochs)}"
    for e, items in epochs.items():
        assert sorted(items) == sorted(subset), f"epoch {e}: {len(items)} items, {len(set(items))} distinct"


def test_three_jobs_with_overlapping_subsets_staggered_and_at_different_speeds(daemon):
    add_synthetic(daemon)
    verify = ["--verify-source", SYNTH, "--resize", "36", "--crop", "32"]
    a = daemon.client("synth", "--ids", "0:300", "--batch", "16", "--epochs", "2", "--delay-ms", "2", *verify)
    time.sleep(0.3)
    b = daemon.client("synth", "--ids", "100:400", "--batch", "8", "--epochs", "2", "--delay-ms", "4", *verify)
    time.sleep(0.3)
    c = daemon.client("synth", "--ids", "50:350", "--batch", "32", "--epochs", "2", "--delay-ms", "1",
                      "--jitter-ms", "3", *verify)
    for proc, lo, hi in ((a, 0, 300), (b, 100, 400), (c, 50, 350)):
        code, epochs, err = received(proc)
        assert code == 0, err
        expect_exact_epochs(epochs, range(lo, hi), 2)
    s = daemon.status()
    assert s["deliveries"] == 2 * (300 + 300 + 300)
    assert s["loads"] < s["deliveries"], s
    assert s["jobs"] == [] and s["pinned_bytes"] == 0


def simulated_ld(workdir, sampler, jobs, items, cache_items, seeds=(0,), policy="refcnt", load_ms=0, loaders=1,
                 **job):
    """`joader simulate` on the same scenario, mean L/D over `seeds`; `job` holds the jobs' batch,
    prefetch, speed and jitter; load_ms and loaders the daemon's load time and loader threads."""
    scenario = os.path.join(workdir, f"{sampler}-{policy}.json")
    with open(scenario, "w") as f:
        json.dump({"universe": items, "cache_items": cache_items, "epochs": 1, "sampler": sampler, "policy": policy,
                   "load_ms": load_ms, "loaders": loaders,
                   "jobs": [{"subset": {"all": True}, **job} for _ in range(jobs)]}, f)
    lds = [json.loads(subprocess.run([JOADER, "simulate", "--scenario", scenario, "--json", "--seed", str(seed)],
                                     check=True, capture_output=True, text=True).stdout)["ld_ratio"]
           for seed in seeds]
    return sum(lds) / len(lds)


def ld_of_three_jobs_started_together(daemon, workdir, dataset, items, *client_args, timeout=120):
    """Three one-epoch jobs of batch 16 on all `items` items, released together by a gate file (as
    simulated jobs start: process start-up on a loaded machine would otherwise skew their starts by
    hundreds of items); checks their epochs and returns the daemon's L/D."""
    gate = os.path.join(workdir, f"gate-{time.monotonic_ns()}")
    procs = [daemon.client(dataset, "--batch", "16", "--epochs", "1", "--start-gate", gate, *client_args)
             for _ in range(3)]
    time.sleep(0.5)
    open(gate, "w").close()
    for proc in procs:
        code, epochs, err = received(proc, timeout=timeout)
        assert code == 0, err
        expect_exact_epochs(epochs, range(items), 1)
    return daemon.status()["ld_ratio"]


@pytest.mark.parametrize("sampler,policy", [("dsa", "refcnt"), ("independent", "refcnt"), ("dsa", "planned")])
def test_the_daemon_shares_loads_as_the_simulator_predicts(daemon_factory, workdir, sampler, policy):
    # 3 jobs, 2000 items of 3 KiB, a cache of 341 items: sharing must come from the coupled
    # sampler, not from the cache. The jobs consume batches of 16 every 8–16 ms (uniform jitter),
    # 1.33 items/ms on average, ±1/3 per batch, slow enough for a sanitizer build's daemon to keep
    # up (the scenario gives the simulator no load time); the simulator runs the daemon's dispatcher on the same
    # scenario (its steps are milliseconds). One run's L/D varies with the seed and the jitter, so
    # the mean of 3 daemon runs must be within 0.03 of the simulator's mean over 8 seeds, for
    # either sampler: the independent one (no coupling) is the control that shows the check can
    # fail. The scenario has no load time: a sanitizer build's daemon, whose loads are several
    # times slower, shared measurably less (DSA: 0.368–0.376 against 0.335 with the same clients;
    # 0.333 since jobs waiting on loads join every round), so there the bound is 0.06. `planned`
    # in the ASan daemon gave 0.395-0.412 here until jobs started together shared their first
    # rounds (dispatch/dispatcher.h, "Starting together"): the items a late-started job had not
    # decided yet were evicted as unplanned and loaded again (docs/BENCHMARKS.md, "The gap
    # traced"); since, 0.333-0.368 beside two busy loops.
    runs = []
    for run in range(3):
        daemon = daemon_factory(cache_size="1MiB", extra=("--sampler", sampler, "--policy", policy))
        add_synthetic(daemon, source="synthetic:2000:40x36")
        runs.append(ld_of_three_jobs_started_together(daemon, workdir, "synth", 2000, "--delay-ms", "8", "--jitter-ms", "8"))
        assert daemon.stop() == 0
    ld = sum(runs) / len(runs)
    reference = simulated_ld(workdir, sampler, 3, 2000, 341, seeds=range(1, 9), policy=policy, batch=16, prefetch=4,
                             speed=16 / 12, jitter=1 / 3)
    print(f"{sampler}, {policy}: daemon L/D {ld:.3f} (runs {', '.join(f'{x:.3f}' for x in runs)}), simulator {reference:.3f}")
    bound = 0.06 if os.environ.get("JOADER_SANITIZE") else 0.03
    assert abs(ld - reference) < bound, f"daemon L/D {ld:.3f} (runs {runs}), simulator {reference:.3f}"
    if sampler == "dsa":
        assert reference < 0.4
    else:
        assert reference > 0.6


@pytest.mark.parametrize("policy", ["refcnt", "planned"])
def test_jobs_faster_than_the_daemon_still_share_every_load(daemon_factory, workdir, policy):
    # The daemon is the bottleneck (2 loader threads decoding 500x375 JPEGs, three clients that
    # consume as fast as they can): each job's next batch waits on loads, and a job waiting on
    # loads joins every round of its peers (dispatch/dispatcher.h, "Supply"). Before that rule, a
    # daemon slower than its jobs stopped sharing rounds: the ASan build beside two busy loops gave
    # 0.403-0.444 (refcnt) where the plain build gave 0.333; crediting the clients' waits once gave
    # 0.556. The bound is the same in every build, on a quiet or a busy machine.
    # The simulator, given the load time the daemon measured and its 2 loaders, predicts the same.
    daemon = daemon_factory(threads=2, extra=("--policy", policy))
    daemon.cli("dataset", "add", "jpeg", "--source", "synthetic:1500:500x375", "--resize", "256", "--crop", "224")
    ld = ld_of_three_jobs_started_together(daemon, workdir, "jpeg", 1500, timeout=300)
    s = daemon.status()
    load_ms = 1000 * s["load_seconds"]["sum"] / s["load_seconds"]["count"]
    cache_items = s["cache_capacity"] // (224 * 224 * 3)
    simulated = simulated_ld(workdir, "dsa", 3, 1500, cache_items, seeds=range(1, 4), policy=policy, batch=16,
                             prefetch=4, speed=50, jitter=0.5, load_ms=load_ms, loaders=2)
    print(f"{policy}: L/D {ld:.3f}, simulated {simulated:.3f} (loads of {load_ms:.1f} ms on 2 loaders)")
    assert ld <= 0.36, f"L/D {ld:.3f}: the jobs stopped sharing rounds while waiting for loads"
    assert abs(ld - simulated) < 0.03, f"daemon L/D {ld:.3f}, simulator {simulated:.3f}"


def test_a_killed_client_releases_its_pins_within_a_second(daemon):
    add_synthetic(daemon)
    victim = daemon.client("synth", "--batch", "16", "--epochs", "1", "--stop-after", "3", "--name", "victim")
    survivor = daemon.client("synth", "--batch", "16", "--epochs", "2", "--delay-ms", "5", "--name", "survivor")
    lines = 0
    while lines < 48:  # three batches
        assert victim.stdout.readline(), victim.stderr.read()
        lines += 1
    time.sleep(0.2)
    assert "victim" in [j["name"] for j in daemon.status()["jobs"]]
    watch = StatusWatch(daemon)
    try:
        victim.send_signal(signal.SIGKILL)
        victim.wait()  # the process is gone (its connection closed): the daemon's 1 s starts here
        gone = time.monotonic()
        at, s = watch.wait_for(lambda s: "victim" not in [j["name"] for j in s["jobs"]], since=gone)
    finally:
        watch.close()
    # The bound is the contract of a release build. A sanitizer build runs the daemon (and the
    # status client that observes it) several times slower: beside two busy loops and other work,
    # an ASan daemon once took 1.20 s here (fresh-clone run 8, 2026-12-07), so it gets twice the bound.
    bound = 2.0 if os.environ.get("JOADER_SANITIZE") else 1.0
    print(f"the killed job's place was released {at - gone:.3f} s after its death")
    assert at - gone < bound, f"the killed job still held its place {at - gone:.2f} s after its death"
    survivors_queue = sum(j["queued"] for j in s["jobs"])
    assert s["pinned_bytes"] <= survivors_queue * 3072, s
    code, epochs, err = received(survivor)
    assert code == 0, err
    expect_exact_epochs(epochs, range(400), 2)
    assert daemon.status()["pinned_bytes"] == 0


def test_sigterm_tells_jobs_and_cleans_up(daemon):
    add_synthetic(daemon)
    job = daemon.client("synth", "--batch", "8", "--epochs", "0", "--delay-ms", "5")
    assert job.stdout.readline()
    arenas = glob.glob(f"/dev/shm/joader-{os.getuid()}-{daemon.proc.pid}-*")
    assert arenas
    assert daemon.stop(signal.SIGTERM) == 0, daemon.output()
    code, _, err = received(job)
    assert code == 3 and "server shutting down" in err, err
    assert not os.path.exists(daemon.socket)
    assert not any(os.path.exists(a) for a in arenas)


def test_a_restart_after_sigkill_cleans_the_stale_socket_and_arena(workdir):
    first = Daemon(workdir)
    arenas = glob.glob(f"/dev/shm/joader-{os.getuid()}-{first.proc.pid}-*")
    first.stop(signal.SIGKILL)
    assert os.path.exists(first.socket) and arenas and os.path.exists(arenas[0])
    second = Daemon(workdir)
    try:
        assert "stale socket" in second.output()
        assert not os.path.exists(arenas[0])
        assert second.status()["datasets"] == []
    finally:
        second.stop()


def test_a_second_daemon_on_a_live_socket_is_refused(daemon):
    r = subprocess.run([os.environ.get("JOADER_BIN", "build/joader"), "serve", "--socket", daemon.socket],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "another Joader daemon" in r.stderr


def test_socket_and_arena_are_private(daemon):
    assert os.stat(daemon.socket).st_mode & 0o777 == 0o600
    arenas = glob.glob(f"/dev/shm/joader-{os.getuid()}-{daemon.proc.pid}-*")
    assert len(arenas) == 1, arenas  # an empty glob would check nothing
    for arena in arenas:
        assert os.stat(arena).st_mode & 0o777 == 0o600


def test_status_reports_datasets_jobs_and_totals(daemon):
    add_synthetic(daemon)
    job = daemon.client("synth", "--ids", "0:100", "--batch", "10", "--epochs", "0", "--delay-ms", "20", "--name", "watch")
    assert job.stdout.readline()
    s = daemon.status()
    for key in ("loads", "deliveries", "ld_ratio", "hits", "cache_bytes", "cache_capacity", "datasets", "jobs"):
        assert key in s
    assert s["datasets"][0]["name"] == "synth" and s["datasets"][0]["items"] == 400
    j = s["jobs"][0]
    assert (j["name"], j["dataset"], j["subset_size"]) == ("watch", "synth", 100)
    assert j["delivered"] >= 10 and j["epoch"] >= 0
    text = daemon.cli("status").stdout
    assert "L/D" in text and "watch" in text
    job.kill()


# --- bad input: a clear error, nothing lost, the daemon stays up ------------------------------

def client_error(daemon, dataset, *args):
    proc = daemon.client(dataset, *args)
    code, _, err = received(proc)
    assert code == 3, f"exit {code}: {err}"
    return err


def test_unknown_dataset(daemon):
    assert "unknown dataset 'nope'" in client_error(daemon, "nope", "--batch", "4")


def test_duplicate_dataset_name_with_another_source(daemon):
    add_synthetic(daemon)
    add_synthetic(daemon)  # the identical spec again: a no-op
    r = daemon.cli("dataset", "add", "synth", "--source", "synthetic:10", "--raw", check=False)
    assert r.returncode == 1 and "already exists" in r.stderr


def test_missing_and_empty_roots(daemon, workdir):
    r = daemon.cli("dataset", "add", "x", "--source", "imagefolder:/no/such/dir", "--crop", "32", check=False)
    assert r.returncode == 1 and "/no/such/dir" in r.stderr
    empty = os.path.join(workdir, "empty")
    os.mkdir(empty)
    r = daemon.cli("dataset", "add", "y", "--source", f"imagefolder:{empty}", "--crop", "32", check=False)
    assert r.returncode == 1 and empty in r.stderr
    r = daemon.cli("dataset", "add", "z", "--source", "bogus:1", "--raw", check=False)
    assert r.returncode == 1 and "bogus" in r.stderr
    assert daemon.proc.poll() is None


def test_without_a_prep_images_are_stored_decoded_at_their_own_size(daemon):
    r = daemon.cli("dataset", "add", "x", "--source", SYNTH)
    assert "uint8 HWC RGB at each image's own size" in r.stdout
    d = daemon.status()["datasets"][0]
    assert (d["height"], d["width"], d["channels"], d["raw"]) == (0, 0, 3, False)
    r = daemon.cli("dataset", "add", "y", "--source", SYNTH, "--raw", "--crop", "8", check=False)
    assert r.returncode == 1 and "--raw" in r.stderr and "--crop" in r.stderr


def test_ids_out_of_range_and_batch_size_zero(daemon):
    add_synthetic(daemon)
    assert "item id 400 is outside the dataset (400 items)" in client_error(daemon, "synth", "--ids", "398:401")
    assert "batch size must be at least 1" in client_error(daemon, "synth", "--batch", "0")


def test_other_protocol_version_is_refused(daemon):
    add_synthetic(daemon)
    err = client_error(daemon, "synth", "--protocol-version", "99")
    assert re.search(r"client speaks protocol version 99, this daemon speaks \d+", err), err


def test_item_or_batch_larger_than_the_cache(daemon_factory):
    daemon = daemon_factory(cache_size="64KiB")
    r = daemon.cli("dataset", "add", "big", "--source", SYNTH, "--crop", "224", check=False)
    assert r.returncode == 1 and "more than the whole cache" in r.stderr
    add_synthetic(daemon)
    assert "one batch of 64 items" in client_error(daemon, "synth", "--batch", "64")


@pytest.mark.parametrize("kind, reason", [
    ("truncated", "truncated"),
    ("zero", "empty file"),
    ("magic", "not a JPEG, PNG, WEBP, TIFF, BMP, PPM or GIF"),
    ("bomb", "more than the limit"),
])
def test_a_bad_file_fails_the_job_naming_item_and_path(daemon, workdir, kind, reason):
    root = os.path.join(workdir, "images")
    make_images(root, bad=kind)
    daemon.cli("dataset", "add", "imgs", "--source", f"imagefolder:{root}", "--crop", "32")
    other = daemon.client("imgs", "--ids", "10:30", "--batch", "5", "--epochs", "3")  # class1, class2: fine
    err = client_error(daemon, "imgs", "--batch", "4")
    bad_path = os.path.join(root, "class0", f"bad_{kind}.jpg")
    assert f"item 0 ({bad_path})" in err and reason in err, err
    code, epochs, err = received(other)
    assert code == 0, err
    expect_exact_epochs(epochs, range(10, 30), 3)
    assert daemon.proc.poll() is None


def test_bad_files_are_skipped_and_counted_with_on_error_skip(daemon, workdir):
    root = os.path.join(workdir, "images")
    make_images(root, bad="truncated,zero,magic")
    daemon.cli("dataset", "add", "imgs", "--source", f"imagefolder:{root}", "--crop", "32", "--on-error", "skip")
    code, epochs, err = received(daemon.client("imgs", "--batch", "4", "--epochs", "2"))
    assert code == 0, err
    # ImageFolder order: class0/bad_magic, bad_truncated, bad_zero, img_0000... -> ids 0..2 are bad
    expect_exact_epochs(epochs, range(3, 33), 2)
    s = daemon.status()
    assert s["skipped"] == 3 and s["datasets"][0]["skipped"] == 3, s  # files, each counted once


def test_a_cache_larger_than_the_shared_memory_is_refused_at_start(workdir):
    r = subprocess.run([os.environ.get("JOADER_BIN", "build/joader"), "serve", "--socket",
                        os.path.join(workdir, "big.sock"), "--cache-size", "64TiB"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "cannot reserve" in r.stderr and "--cache-size" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(workdir, "big.sock"))


def test_zero_loader_threads_are_refused_at_start(workdir):
    r = subprocess.run([os.environ.get("JOADER_BIN", "build/joader"), "serve", "--socket",
                        os.path.join(workdir, "zero.sock"), "--threads", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--threads" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(workdir, "zero.sock"))


def test_a_killed_daemon_gives_every_client_a_clear_error_within_a_second(daemon):
    add_synthetic(daemon)
    jobs = [daemon.client("synth", "--batch", "8", "--epochs", "0", "--delay-ms", "5") for _ in range(2)]
    for job in jobs:
        assert job.stdout.readline()
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait()
    killed = time.monotonic()
    for job in jobs:
        code, _, err = received(job, timeout=10)
        assert code == 3 and "lost the Joader daemon" in err, err
        # Timed inside the client (when it saw the loss), not by its exit, which a sanitizer slows.
        assert error_time(err) - killed < 1.0, f"a client saw the daemon's death {error_time(err) - killed:.2f} s late"


def test_a_stopped_client_holds_only_its_own_items_and_resumes_after_sigcont(daemon):
    add_synthetic(daemon)
    hung = daemon.client("synth", "--batch", "8", "--epochs", "2", "--delay-ms", "2", "--name", "hung")
    deadline = time.monotonic() + 10
    while not any(j["name"] == "hung" and j["delivered"] > 0 for j in daemon.status()["jobs"]):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    hung.send_signal(signal.SIGSTOP)
    try:
        other = daemon.client("synth", "--batch", "8", "--epochs", "2", "--name", "other")
        code, epochs, err = received(other)
        assert code == 0, err
        expect_exact_epochs(epochs, range(400), 2)
        s = daemon.status()
        (h,) = [j for j in s["jobs"] if j["name"] == "hung"]
        assert s["pinned_bytes"] <= h["queued"] * 3072
    finally:
        hung.send_signal(signal.SIGCONT)
    code, epochs, err = received(hung)
    assert code == 0, err
    expect_exact_epochs(epochs, range(400), 2)


def test_a_broken_symlink_in_an_imagefolder_fails_the_job_naming_its_path(daemon, workdir):
    root = os.path.join(workdir, "images")
    make_images(root)
    link = os.path.join(root, "class1", "aaa_gone.jpg")
    os.symlink(os.path.join(workdir, "nowhere.jpg"), link)  # torchvision lists it too
    daemon.cli("dataset", "add", "imgs", "--source", f"imagefolder:{root}", "--crop", "32")
    err = client_error(daemon, "imgs", "--ids", "10", "--batch", "1")
    assert f"item 10 ({link})" in err, err


def test_a_filelist_with_a_missing_path_or_a_malformed_line_is_refused_naming_the_line(daemon, workdir):
    root = os.path.join(workdir, "images")
    make_images(root, classes=1, per_class=2)
    good = os.path.join(root, "class0", "img_0000.jpg")
    for name, text, words in (("missing", f"{good}\t0\n/no/such.jpg\t1\n", "line 2"),
                              ("malformed", f"{good}\t0\njust-a-path\n", "line 2")):
        lst = os.path.join(workdir, f"{name}.txt")
        with open(lst, "w") as f:
            f.write(text)
        r = daemon.cli("dataset", "add", name, "--source", f"filelist:{lst}", "--crop", "16", check=False)
        assert r.returncode == 1 and words in r.stderr, r.stderr
    lst = os.path.join(workdir, "ok.txt")
    with open(lst, "w") as f:
        f.write(f"# a comment\n\n{good}\t7\n")
    daemon.cli("dataset", "add", "ok", "--source", f"filelist:{lst}", "--crop", "16")
    code, epochs, err = received(daemon.client("ok", "--batch", "1", "--epochs", "2"))
    assert code == 0 and epochs == {0: [0], 1: [0]}, err


def test_a_batch_larger_than_the_subset_is_the_whole_epoch_as_in_torch(daemon):
    # Reservations count the items a batch can hold (at most the subset), not batch × item bytes.
    add_synthetic(daemon)
    code, epochs, err = received(daemon.client("synth", "--batch", "4000000000", "--epochs", "1"))
    assert code == 0 and sorted(epochs[0]) == list(range(400)), err


def test_absurd_job_requests_get_clear_errors(daemon):
    add_synthetic(daemon)
    assert "cannot resume in epoch 5 of a job with 2 epochs" in client_error(
        daemon, "synth", "--epochs", "2", "--resume-epoch", "5")
    assert "consumed item 7 is not in the job's subset" in client_error(
        daemon, "synth", "--ids", "0:5", "--resume-consumed", "7")
    code, epochs, err = received(daemon.client("synth", "--ids", "0:50", "--batch", "8", "--prefetch", "1000000"))
    assert code == 0 and sorted(epochs[0]) == list(range(50)), err
    assert daemon.proc.poll() is None


def test_datasets_survive_a_daemon_restart_unless_removed(workdir):
    first = Daemon(workdir)
    add_synthetic(first)
    first.cli("dataset", "add", "gone", "--source", "synthetic:10", "--crop", "8")
    first.cli("dataset", "rm", "gone")
    first.stop(signal.SIGKILL)
    second = Daemon(workdir)
    try:
        assert [d["name"] for d in second.status()["datasets"]] == ["synth"]
        assert "restored dataset 'synth'" in second.output()
        code, epochs, err = received(second.client("synth", "--ids", "0:20", "--batch", "5"))
        assert code == 0 and sorted(epochs[0]) == list(range(20)), err
    finally:
        second.stop()
    third = Daemon(workdir, extra=("--state", "none"))
    try:
        assert third.status()["datasets"] == []
    finally:
        third.stop()


def test_a_disk_cache_serves_a_restarted_daemon_without_decoding_and_is_one_daemons(workdir):
    disk = os.path.join(workdir, "disk")
    first = Daemon(workdir, extra=("--disk-cache", disk))
    try:
        assert "disk cache " + disk + ": 0 items" in first.output()
        add_synthetic(first)
        code, epochs, err = received(first.client("synth", "--ids", "0:40", "--batch", "5"))
        assert code == 0 and sorted(epochs[0]) == list(range(40)), err
        deadline = time.monotonic() + 30
        while (d := first.status()["disk_cache"])["written"] < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert d["written"] == 40 and d["items"] == 40 and d["admitting"], d
        other = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "other.sock"), "--state", "none",
                                "--disk-cache", disk], capture_output=True, text=True, timeout=30)
        assert other.returncode == 1, other.stderr
        assert f"--disk-cache: the disk cache {disk} is in use by another process (pid {first.proc.pid})" in other.stderr
    finally:
        first.stop(signal.SIGKILL)
    second = Daemon(workdir, extra=("--disk-cache", disk))
    try:
        assert second.status()["disk_cache"]["items"] == 40
        code, epochs, err = received(second.client("synth", "--ids", "0:40", "--batch", "5", "--epochs", "2"))
        assert code == 0 and [sorted(epochs[e]) for e in (0, 1)] == [list(range(40))] * 2, err
        s = second.status()
        assert s["disk_reads"] == 40 and s["loads"] == 40, s  # the cache held the second epoch
        assert s["disk_cache"]["hits"] == 40 and s["disk_cache"]["written"] == 0
        assert "40 of the 40 loads read back from it, 0 decoded" in second.cli("status").stdout
        assert "disk      " in second.cli("top", "--once").stdout
    finally:
        second.stop()
