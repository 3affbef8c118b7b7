"""What a new user meets in the first hour: loops written as for torch's DataLoader, names that
stay the same across processes, and Ctrl-C while waiting for a daemon that does not answer."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import joader
import joader.torch
from conftest import BUILD, Daemon


def test_a_dataloader_iterates_like_torchs_one_epoch_per_pass_as_many_passes_as_the_loop_makes(client):
    client.add_dataset("synth", source="synthetic:20:16x16", crop=8)
    with joader.torch.DataLoader("synth", batch_size=6, client=client, with_indices=True) as dl:
        assert len(dl) == 4
        for epoch in range(3):
            ids = sorted(i for _, _, batch in dl for i in batch.tolist())
            assert ids == list(range(20)), f"pass {epoch}"
    assert client.status()["jobs"] == [], "leaving the with block ends the job"


def test_a_pass_beyond_an_explicit_epochs_is_an_error_not_an_empty_epoch(client):
    client.add_dataset("synth", source="synthetic:10:16x16", crop=8)
    dl = joader.torch.DataLoader("synth", batch_size=4, epochs=1, client=client)
    assert sum(len(y) for _, y in dl) == 10
    with pytest.raises(joader.JoaderError, match="delivered all its epochs=1"):
        next(iter(dl))
    with joader.Loader("synth", batch_size=4, epochs=2, client=client) as loader:
        assert sum(len(b.indices) for b in loader) == 20  # one pass yields all its epochs
        with pytest.raises(joader.JoaderError, match="delivered all its epochs=2"):
            next(iter(loader))


def test_derived_dataset_names_are_the_same_in_every_process_and_name_the_prep(workdir):
    folder = os.path.join(workdir, "train")
    script = f"import sys; sys.path.insert(0, {os.path.join(BUILD, 'python')!r}); import joader; " \
             f"print(joader.dataset_name('imagefolder:{folder}', resize=256))"
    names = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
             for _ in range(2)}
    assert len(names) == 1 and next(iter(names)).startswith("train-"), names
    assert joader.dataset_name(f"imagefolder:{folder}", resize=256) in names
    assert joader.dataset_name(f"imagefolder:{folder}") not in names, "another prep is another dataset"
    here = os.getcwd()
    try:
        os.chdir(workdir)
        assert joader.dataset_name("imagefolder:train", resize=256) in names, "relative paths are made absolute"
    finally:
        os.chdir(here)


WAITER = """
import sys, time
sys.path.insert(0, {build!r})
import joader
client = joader.Client({socket!r})
loader = joader.Loader("synth", batch_size=2, epochs=None, client=client)
batches = iter(loader)
next(batches)
print("ready", flush=True)
sys.stdin.readline()  # the test stops the daemon, then says go
started = time.monotonic()
try:
    {wait}
except KeyboardInterrupt:
    print(f"interrupted after {{time.monotonic() - started:.2f}} s", flush=True)
    sys.exit(0)
print("returned", flush=True)
"""


@pytest.mark.parametrize("wait", ["for _ in range(10**6): next(batches)", "client.datasets()", "client.status()"])
def test_ctrl_c_interrupts_a_wait_for_a_daemon_that_does_not_answer(workdir, wait):
    daemon = Daemon(workdir)
    try:
        joader.Client(daemon.socket).add_dataset("synth", source="synthetic:1000:16x16", crop=8)
        script = WAITER.format(build=os.path.join(BUILD, "python"), socket=daemon.socket, wait=wait)
        proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            daemon.proc.send_signal(signal.SIGSTOP)  # alive, accepting connections, answering nothing
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(1.0)  # the loader's prefetched batches are consumed; then it waits
            assert proc.poll() is None, "the wait returned while the daemon was stopped"
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=10)
            assert proc.returncode == 0 and "interrupted after" in out, out
            assert time.monotonic() - sent < 2.0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
        daemon.stop()


def test_a_loader_that_cannot_get_room_gets_an_error_naming_the_jobs_that_hold_it(workdir):
    # A notebook: loaders opened, one batch taken from each, left open. Every byte is then in
    # batches sent to consumers that do not come back: nothing can be reclaimed, and the next loader
    # gets, within seconds, an error naming the jobs that hold the cache instead of blocking forever.
    daemon = Daemon(workdir, cache_size="1MiB")
    try:
        client = joader.Client(daemon.socket)
        client.add_dataset("own", source="synthetic:400:64x64")
        holders = []
        for n in range(30):
            loader = joader.Loader("own", name=f"holder-{n}", batch_size=10, epochs=None, client=client)
            holders.append(loader)
            started = time.monotonic()
            try:
                next(iter(loader))
            except joader.JoaderError as e:
                assert time.monotonic() - started < 15, "the error comes within seconds (10 s without progress)"
                assert "no room in the cache for a batch of job holder-" in str(e), e
                assert "holder-0 (" in str(e) and "--cache-size" in str(e), e
                break
        else:
            pytest.fail("30 loaders of 10 images of 12 KB each fit in 1 MiB")
    finally:
        daemon.stop()

