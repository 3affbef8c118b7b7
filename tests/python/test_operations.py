"""Operating the daemon: Prometheus metrics, "is my training waiting on data?", `joader top`."""
import os
import pty
import select
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import joader
from conftest import JOADER, Daemon


def wait_until_no_jobs(client):
    """A closed job is released when its cancelled stream reaches the daemon: a moment later."""
    for _ in range(250):
        status = client.status()
        if not status["jobs"]:
            return status
        time.sleep(0.02)
    raise AssertionError(f"jobs still registered: {status['jobs']}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def value(families, name, **labels):
    for family in families.values():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(f"{name} {labels}")


def test_metrics_agree_with_status_and_report_the_jobs_waits(workdir):
    port = free_port()
    daemon = Daemon(workdir, extra=("--metrics", f"127.0.0.1:{port}", "--metrics-names"))
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("s", source="synthetic:120:48x40", crop=16)
        loader = joader.Loader("s", name="trainer", batch_size=10, epochs=2, client=client)
        batches = iter(loader)
        for _ in range(6):
            next(batches)
            time.sleep(0.01)  # "training"
        for _ in range(50):  # the last ack travels on its own: wait until the daemon has it
            jobs = {j["name"]: j for j in client.status()["jobs"]}
            if abs(jobs["trainer"]["wait_seconds"] - loader.wait_seconds) < 1e-9:
                break
            time.sleep(0.02)
        assert loader.wait_seconds > 0
        assert jobs["trainer"]["wait_seconds"] == pytest.approx(loader.wait_seconds, abs=1e-9)
        families, text = scrape(port)
        assert value(families, "joader_job_wait_seconds_total", dataset="s", job="trainer") == pytest.approx(
            loader.wait_seconds, abs=1e-9)
        for _ in batches:
            pass
        loader.close()
        status = wait_until_no_jobs(client)
        families, text = scrape(port)
        for metric, field in [("joader_loads_total", "loads"), ("joader_deliveries_total", "deliveries"),
                              ("joader_cache_hits_total", "hits"), ("joader_evictions_total", "evictions"),
                              ("joader_cache_bytes", "cache_bytes"), ("joader_cache_capacity_bytes", "cache_capacity"),
                              ("joader_pinned_bytes", "pinned_bytes"), ("joader_space_waits_total", "space_waits"),
                              ("joader_split_items_total", "split_items"), ("joader_cached_items", "cached_items"),
                              ("joader_cached_blocks", "cached_blocks"),
                              ("joader_arena_huge_page_bytes", "arena_huge_bytes")]:
            assert value(families, metric) == status[field], metric
        assert value(families, "joader_jobs") == len(status["jobs"]) == 0
        assert value(families, "joader_skipped_items_total", dataset="s") == 0
        assert value(families, "joader_load_seconds_count") == status["loads"] == status["load_seconds"]["count"]
        assert value(families, "joader_load_seconds_bucket", le="+Inf") == status["loads"]
        assert families["joader_load_seconds"].type == "histogram"
        for name in ("joader_loads_total", "joader_deliveries_total", "joader_job_delivered_items_total",
                     "joader_job_wait_seconds_total"):
            assert f"# TYPE {name} counter" in text
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
    finally:
        assert daemon.stop() == 0


def test_metrics_name_no_job_or_dataset_unless_asked(workdir):
    port = free_port()
    daemon = Daemon(workdir, extra=("--metrics", f"127.0.0.1:{port}"))
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("patient-scans-private", source="synthetic:40:16x16", crop=8)
        loader = joader.Loader("patient-scans-private", name="secret-trial", batch_size=4, epochs=1, client=client)
        batches = iter(loader)
        next(batches)
        status = client.status()
        job, = status["jobs"]
        dataset, = status["datasets"]
        families, text = scrape(port)
        assert "patient-scans" not in text and "secret-trial" not in text
        assert value(families, "joader_job_delivered_items_total", dataset=str(dataset["id"]),
                     job=str(job["id"])) >= 4, "labelled by the numbers status shows"
        assert value(families, "joader_skipped_items_total", dataset=str(dataset["id"])) == 0
        loader.close()
    finally:
        assert daemon.stop() == 0


def test_metrics_are_off_by_default_and_a_bad_address_is_refused(workdir):
    r = subprocess.run([JOADER, "serve", "--socket", os.path.join(workdir, "x.sock"), "--metrics", "localhost:http"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "error: --metrics: expected PORT or HOST:PORT" in r.stderr
    daemon = Daemon(workdir)
    try:
        assert "metrics" not in open(daemon.log_path).read()
    finally:
        daemon.stop()


def read_terminal(fd, timeout):
    """What the program on the terminal's other side wrote, waiting up to `timeout` s for some (b""
    if nothing came); None once it is closed and everything was read (EIO)."""
    if not select.select([fd], [], [], timeout)[0]:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:
        return None


def run_top_in_a_terminal(daemon, key=None, sig=None):
    """Runs `joader top` under a pseudo-terminal until it has drawn twice, then presses `key` or
    sends `sig`; returns (exit status, everything it drew)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(JOADER, [JOADER, "top", "--socket", daemon.socket, "--interval", "0.2"])
    screen, deadline = b"", time.monotonic() + 20
    while screen.count(b"joader top") < 2 and time.monotonic() < deadline:
        data = read_terminal(fd, 0.5)
        if data is None:
            break
        screen += data
    if key is not None:
        os.write(fd, key)
    else:
        os.kill(pid, sig)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        screen += read_terminal(fd, 0.1) or b""
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("joader top did not exit")
    # What it wrote just before exiting (the cursor given back) may still wait in the terminal.
    while data := read_terminal(fd, 0.1):
        screen += data
    os.close(fd)
    return os.waitstatus_to_exitcode(status), screen.decode(errors="replace")


def test_top_shows_jobs_cache_and_sharing_live_and_quits_on_q_or_ctrl_c(client, daemon):
    client.add_dataset("s", source="synthetic:400:48x40", crop=16)
    loader = joader.Loader("s", name="watched-job", batch_size=10, epochs=None, client=client)
    batches = iter(loader)
    next(batches)
    code, screen = run_top_in_a_terminal(daemon, key=b"q")
    assert code == 0
    for text in ("joader top", "L/D", "hit rate", "cache", "JOB", "EPOCH PROGRESS", "ITEMS/S", "WAIT%",
                 "watched-job", "/400"):
        assert text in screen, text
    assert "\x1b[?25h" in screen  # the cursor is given back
    code, screen = run_top_in_a_terminal(daemon, sig=2)  # Ctrl-C
    assert code == 0 and "\x1b[?25h" in screen
    loader.close()
    wait_until_no_jobs(client)
    once = subprocess.run([JOADER, "top", "--once", "--socket", daemon.socket], capture_output=True, text=True)
    assert once.returncode == 0 and "(no jobs)" in once.stdout and "\x1b" not in once.stdout


def test_top_once_shows_whole_names_wait_shares_over_its_interval_and_stalled_rates_falling(client, daemon):
    client.add_dataset("s", source="synthetic:40:48x40", crop=16)
    name = "a-rather-long-job-name-of-a-sweep-run-17"
    stalled = joader.Loader("s", name=name, batch_size=4, epochs=None, client=client)
    it = iter(stalled)
    for _ in range(5):
        next(it)  # then it stops consuming
    time.sleep(1.5)
    once = subprocess.run([JOADER, "top", "--once", "--interval", "0.3", "--socket", daemon.socket],
                          capture_output=True, text=True, timeout=30)
    assert once.returncode == 0, once.stderr
    rows = {line.split()[0]: line.split() for line in once.stdout.splitlines() if line.startswith("a-rather")}
    assert name in rows, once.stdout  # whole, not cut at 24 characters
    assert rows[name][-2] == "0", f"WAIT% over the interval, not '-': {once.stdout}"
    jobs = {j["name"]: j for j in client.status()["jobs"]}
    assert not jobs[name]["finished"]  # "done" once finished: src/client/report_test.cc
    # 4 items per batch, idle for over 1.5 s: at most 4 / 1.5 items/s shown, not the rate it had.
    assert jobs[name]["items_per_second"] < 3, jobs[name]
    stalled.close()


def test_job_rm_ends_a_stale_job_at_once_and_its_loader_is_told_who_ended_it(client, daemon):
    client.add_dataset("s", source="synthetic:40:48x40", crop=16)
    stale = joader.Loader("s", name="stale-notebook", batch_size=4, epochs=None, client=client)
    it = iter(stale)
    next(it)  # then left open, as a notebook leaves it
    deadline = time.monotonic() + 10
    while client.status()["pinned_bytes"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)  # the batches decided ahead of it are still loading
    assert client.status()["pinned_bytes"] > 0
    r = daemon.cli("job", "rm", "stale-notebook")
    assert "ended job 'stale-notebook'" in r.stdout
    status = client.status()
    assert status["jobs"] == [] and status["pinned_bytes"] == 0, "released at once, not when the loader comes back"
    with pytest.raises(joader.JoaderError, match=r"job stale-notebook was ended by another client") as e:
        for _ in range(20):  # batches it had already received come first
            next(it)
    assert e.value.code == 9, "not UNAVAILABLE: a loader does not reconnect to a job that was ended"
    missing = daemon.cli("job", "rm", "stale-notebook", check=False)
    assert missing.returncode == 1 and "no job named 'stale-notebook'" in missing.stderr
    with pytest.raises(joader.JoaderError, match="no job named 'other'"):
        client.end_job("other")


def test_status_gives_each_dataset_its_own_ld(client, daemon):
    client.add_dataset("a", source="synthetic:40:48x40", crop=16)
    client.add_dataset("b", source="synthetic:30:48x40", crop=16)
    for _ in range(2):  # two one-epoch jobs on a, one after the other: the second hits the cache
        with joader.Loader("a", batch_size=10, epochs=1, client=client) as loader:
            assert sum(len(b.indices) for b in loader) == 40
    with joader.Loader("b", batch_size=10, epochs=1, client=client) as loader:
        assert sum(len(b.indices) for b in loader) == 30
    datasets = {d["name"]: d for d in client.status()["datasets"]}
    assert datasets["a"]["deliveries"] == 80 and datasets["b"]["deliveries"] == 30
    assert datasets["a"]["loads"] + datasets["b"]["loads"] == client.status()["loads"]
    assert datasets["b"]["ld_ratio"] == 1.0 and datasets["a"]["ld_ratio"] == datasets["a"]["loads"] / 80
    text = subprocess.run([JOADER, "status", "--socket", daemon.socket], capture_output=True, text=True).stdout
    assert "L/D" in text.split("dataset")[1] and "1.000" in text
