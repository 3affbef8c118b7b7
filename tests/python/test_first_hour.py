"""What a new user meets in the first hour: loops written as for torch's DataLoader, names that
stay the same across processes, Ctrl-C while waiting for a daemon that does not answer, and
Joader in forked and spawned workers."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import joader
import joader.torch
from conftest import BUILD, Daemon, make_images, photo_imagefolder
from daemon_process import stop_process


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
import signal, sys, time
# Ctrl-C as in a terminal, also when make test runs in the background (where SIGINT is ignored
# and Python then installs no KeyboardInterrupt handler).
signal.signal(signal.SIGINT, signal.default_int_handler)
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
            stop_process(daemon.proc.pid)  # alive, accepting connections, answering nothing
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(1.0)  # the loader's prefetched batches are consumed; then it waits
            if proc.poll() is not None:
                pytest.fail(f"the wait ended (exit status {proc.returncode}) while the daemon was stopped; it said: "
                            f"{proc.stdout.read()!r}")
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



def test_no_silent_change_of_data_a_changed_folder_is_named_at_re_add_resume_and_restart(workdir):
    images = os.path.join(workdir, "images")
    make_images(images, classes=2, per_class=5)
    source = "imagefolder:" + images
    daemon = Daemon(workdir)
    try:
        client = joader.Client(daemon.socket)
        first = client.add_dataset("eval", source=source, resize=16, crop=16)
        assert len(first["fingerprint"]) == 16 and not first["existed"]
        again = client.add_dataset("eval", source=source, resize=16, crop=16)
        assert again["existed"] and again["fingerprint"] == first["fingerprint"], "an identical re-add is a no-op"
        with pytest.raises(joader.JoaderError, match=r"already exists with on_error fail \(this request: skip\)"):
            client.add_dataset("eval", source=source, resize=16, crop=16, on_error="skip")

        loader = joader.torch.DataLoader("eval", batch_size=4, client=client)
        next(iter(loader))
        state = loader.state_dict()
        assert state["fingerprint"] == first["fingerprint"] and state["dataset_items"] == 10
        loader.close()

        shutil.copy(os.path.join(images, "class0", os.listdir(os.path.join(images, "class0"))[0]),
                    os.path.join(images, "class0", "000-new.jpg"))  # sorts first: every id of class 0 shifts
        with pytest.raises(joader.JoaderError, match=r"already exists with 10 items .* now lists 11 .*files changed") \
                as e:
            client.add_dataset("eval", source=source, resize=16, crop=16)
        assert e.value.code == 9  # FAILED_PRECONDITION
        assert client.dataset("eval")["items"] == 10, "the registered list is still served"
    finally:
        daemon.stop()

    # A restart re-indexes and says so, in the log and in status; the old state cannot resume on it.
    daemon = Daemon(workdir)
    try:
        client = joader.Client(daemon.socket)
        info = client.dataset("eval")
        assert info["items"] == 11 and info["fingerprint"] != first["fingerprint"]
        assert "re-indexed" in info["reindexed"] and "it lists 11 items" in info["reindexed"], info["reindexed"]
        assert "warning: dataset 'eval': its files changed while the daemon was down" in daemon.output()
        assert "warning: dataset 'eval'" in daemon.cli("status").stdout
        with pytest.raises(ValueError, match=r"listed 10 items .* now lists 11 .*files changed"):
            joader.torch.DataLoader("eval", batch_size=4, client=client, state=state)
        with pytest.raises(ValueError, match="files changed"):
            joader.Loader("eval", batch_size=4, client=client, state=state)
    finally:
        daemon.stop()


def test_a_loader_continues_exactly_after_its_daemon_is_killed_and_restarted(workdir, capfd):
    daemon = Daemon(workdir)
    restarted = []
    try:
        joader.Client(daemon.socket).add_dataset("synth", source="synthetic:60:16x16", crop=16)
        loader = joader.Loader("synth", batch_size=7, epochs=2, prefetch=2, client=joader.Client(daemon.socket))
        epochs = {0: [], 1: []}
        for n, batch in enumerate(loader):
            epochs[batch.epoch] += batch.indices.tolist()
            if n == 3:  # mid-epoch, batches prepared ahead: kill -9, and a new daemon a second later
                daemon.stop(signal.SIGKILL)
                threading.Timer(1.0, lambda: restarted.append(Daemon(workdir))).start()
        assert restarted, "the loop went on through the restart"
        for e in (0, 1):
            assert sorted(epochs[e]) == list(range(60)), f"epoch {e}: every item exactly once"
        err = capfd.readouterr().err
        assert "waiting up to 60 s for the daemon to come back" in err and "reconnected; continuing epoch 0" in err
    finally:
        for d in [daemon, *restarted]:
            if d.proc.poll() is None:
                d.stop()


def test_a_loader_without_reconnect_fails_at_once_when_the_daemon_is_lost(workdir):
    daemon = Daemon(workdir)
    try:
        joader.Client(daemon.socket).add_dataset("synth", source="synthetic:60:16x16", crop=16)
        loader = joader.Loader("synth", batch_size=7, client=joader.Client(daemon.socket), reconnect=False)
        it = iter(loader)
        next(it)
        daemon.stop(signal.SIGKILL)
        with pytest.raises(joader.JoaderError) as e:
            for _ in it:
                pass
        assert e.value.code == 14
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


# Sockets of this process connected to the daemon (their peer is its pid).
DAEMON_SOCKETS = """
def daemon_sockets(daemon_pid):
    import socket, struct
    found = []
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.family == socket.AF_UNIX:
                pid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                if pid == daemon_pid:
                    found.append(fd)
        except OSError:
            pass
        finally:
            s.close()
    return found
"""

FORKED_CHILD = """
import os, sys
sys.path.insert(0, {python!r})
import joader
""" + DAEMON_SOCKETS + """
client = joader.Client({socket!r})
client.datasets()
loader = joader.Loader("synth", batch_size=5, epochs=None, client=client)  # made, not started
pid = os.fork()
if pid == 0:  # multiprocessing, a DataLoader worker: the inherited client and loader, and new ones, work
    print("child holds the parent's connection", daemon_sockets({daemon_pid}) != [], flush=True)
    print("child datasets", [d["name"] for d in client.datasets()], flush=True)
    epoch = sorted(i for b in joader.Loader("synth", batch_size=5, client=joader.Client({socket!r}))
                   for i in b.indices.tolist())
    print("child epoch", epoch == list(range(20)), flush=True)
    print("child inherited loader", len(next(iter(loader)).indices), flush=True)
    sys.exit(0)  # the inherited objects are collected here, leaving the parent's connection alone
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
it = iter(loader)
for _ in range(10):
    next(it)
print("parent ok", flush=True)
"""

FORKED_WITH_A_JOB_OPEN = """
import os, sys
sys.path.insert(0, {python!r})
import joader
""" + DAEMON_SOCKETS + """
client = joader.Client({socket!r})
it = iter(joader.Loader("synth", batch_size=5, epochs=None, client=client))
next(it)
pid = os.fork()
if pid == 0:
    print("child holds the parent's connection", daemon_sockets({daemon_pid}) != [], flush=True)
    try:
        client.datasets()
    except joader.JoaderError as e:
        print(e.code, e, flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
for _ in range(10):
    next(it)  # the parent goes on
print("parent ok", flush=True)
"""

DATALOADER_WORKERS = """
import sys
sys.path.insert(0, {python!r})
import torch.utils.data
import joader
client = joader.Client({socket!r})
client.datasets()

class CallsJoader(torch.utils.data.Dataset):  # each item read through Joader in the worker
    def __len__(self):
        return 6

    def __getitem__(self, i):
        names = [d["name"] for d in client.datasets()]
        ids = [int(x) for b in joader.Loader("synth", indices=[i, i + 6], batch_size=2, client=client)
               for x in b.indices.tolist()]
        return torch.tensor(sorted(ids) + [names == ["synth"]])

got = [row.tolist() for b in torch.utils.data.DataLoader(CallsJoader(), batch_size=2, num_workers=2) for row in b]
print(got == [[i, i + 6, 1] for i in range(6)], got, flush=True)
next(iter(joader.Loader("synth", batch_size=5, epochs=None, client=client)))
print("parent ok", flush=True)
"""

# A stock training script: a Joader job open all along, and torch's own DataLoader for the val pass,
# which forks its workers at every pass; Joader's Python transform runs in forked workers too.
TRAINS_AND_FORKS = """
import sys, time
sys.path.insert(0, {python!r})
import torch, torch.utils.data
import torchvision.transforms as T
import joader, joader.torch

class Rotate:  # a user's own transform: the Python pool runs it
    def __call__(self, img):
        return img.rotate(3)

val = torch.utils.data.TensorDataset(torch.arange(32).float())
train = joader.torch.DataLoader("photos", batch_size=8, client=joader.Client({socket!r}), num_workers=2,
                                augment=T.Compose([T.RandomResizedCrop(24), Rotate()]), with_indices=True)
for epoch in range(int(sys.argv[1])):
    ids = sorted(i for _, _, batch in train for i in batch.tolist())
    print("epoch", epoch, "exact" if ids == list(range(48)) else ids, flush=True)
    for _ in torch.utils.data.DataLoader(val, batch_size=8, num_workers=2):
        pass
train.close()
"""


FORKED_DURING_A_CALL = """
import os, signal, sys, threading, time
sys.path.insert(0, {python!r})
sys.path.insert(0, {tests!r})
import joader
from daemon_process import stop_process
client = joader.Client({socket!r})
client.datasets()
stop_process({daemon_pid})  # the thread's call waits for the daemon
waiting = threading.Thread(target=client.status)
waiting.start()
while joader._native.testing.calls_in_grpc() == 0:
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    try:
        client.datasets()
        print("worked", flush=True)
    except joader.JoaderError as e:
        print(e.code, e, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
os.kill({daemon_pid}, signal.SIGCONT)
waiting.join()
client.datasets()
print("parent ok", flush=True)
"""


SPAWNED_WORKER = """
import multiprocessing, sys
sys.path.insert(0, {python!r})
import joader

def work(socket, out):
    out.put(sorted(i for b in joader.Loader("synth", batch_size=5, epochs=1, client=joader.Client(socket))
                   for i in b.indices.tolist()))

if __name__ == "__main__":
    client = joader.Client({socket!r})
    first = next(iter(joader.Loader("synth", batch_size=5, epochs=None, client=client)))
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=work, args=({socket!r}, out))
    p.start()
    print(out.get(timeout=60) == list(range(20)), flush=True)
    p.join(timeout=60)
"""


@contextlib.contextmanager
def daemon_with_synth(workdir):
    daemon = Daemon(workdir)
    try:
        joader.Client(daemon.socket).add_dataset("synth", source="synthetic:20:16x16", crop=16)
        yield daemon
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)  # in case a script stopped it
        daemon.stop()


def run_script(workdir, daemon, template, timeout=60):
    """Runs `template` (formatted with python, tests (this suite's helpers), socket, daemon_pid) in
    a new interpreter."""
    script = os.path.join(workdir, "script.py")
    with open(script, "w") as f:
        f.write(template.format(python=os.path.join(BUILD, "python"), socket=daemon.socket,
                                daemon_pid=daemon.proc.pid, tests=os.path.dirname(os.path.dirname(__file__))))
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r


def test_a_child_forked_with_no_job_open_uses_joader_but_never_the_parents_connection(workdir):
    with daemon_with_synth(workdir) as daemon:
        r = run_script(workdir, daemon, FORKED_CHILD)
    assert r.stdout.splitlines() == ["child holds the parent's connection False", "child datasets ['synth']",
                                     "child epoch True", "child inherited loader 5", "parent ok"], r.stdout
    assert "lost the Joader daemon" not in r.stderr, "the child's exit left the parent's connection alone"


def test_a_child_forked_while_a_job_is_open_is_told_to_spawn_and_the_parents_job_goes_on(workdir):
    with daemon_with_synth(workdir) as daemon:
        r = run_script(workdir, daemon, FORKED_WITH_A_JOB_OPEN)
    lines = r.stdout.splitlines()
    assert lines[0] == "child holds the parent's connection False", r.stdout
    assert lines[1].startswith("9 this process was forked from process"), r.stdout
    assert "while a Joader job was open in it" in lines[1] and "'spawn'" in lines[1], lines[1]
    assert lines[2:] == ["parent ok"], r.stdout
    assert "lost the Joader daemon" not in r.stderr


def test_torch_dataloader_workers_whose_dataset_calls_joader_work(workdir):
    with daemon_with_synth(workdir) as daemon:
        r = run_script(workdir, daemon, DATALOADER_WORKERS, timeout=120)
    assert r.stdout.splitlines()[0].startswith("True"), r.stdout
    assert r.stdout.splitlines()[1:] == ["parent ok"], r.stdout


def test_jobs_whose_processes_fork_at_every_pass_get_every_epoch_exactly_and_never_stall(workdir, tmp_path):
    # Forked children whose copy of gRPC was restarted read the parent's connection (the socket they
    # share): the parent's job lost a batch, or stalled for good (issue 41; src/client/fork_safety.h).
    # Before the fix, 2 of these 3 processes stalled in each of 2 runs.
    folder = photo_imagefolder(tmp_path, 48, 100, 400)
    daemon = Daemon(workdir, cache_size="128MiB")
    epochs, procs = 24, []
    try:
        joader.Client(daemon.socket).add_dataset("photos", source=f"imagefolder:{folder}")
        script = os.path.join(workdir, "trains_and_forks.py")
        with open(script, "w") as f:
            f.write(TRAINS_AND_FORKS.format(python=os.path.join(BUILD, "python"), socket=daemon.socket))
        logs = [open(os.path.join(workdir, f"job{k}.log"), "w+") for k in range(3)]
        procs = [subprocess.Popen([sys.executable, script, str(epochs)], stdout=log, stderr=subprocess.STDOUT)
                 for log in logs]
        # A stalled job makes no progress at all; a busy machine only makes every epoch slower.
        deadline = time.monotonic() + 600
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(1)
            stalled = [k for k, p in enumerate(procs) if p.poll() is None and os.path.getsize(logs[k].name) > 0
                       and time.time() - os.path.getmtime(logs[k].name) > 60]
            assert not stalled, f"jobs {stalled} made no progress for 60 s:\n" + "\n".join(
                open(log.name).read() for log in logs)
        for k, p in enumerate(procs):
            out = open(logs[k].name).read()
            assert p.wait(timeout=1) == 0, out
            assert out.splitlines() == [f"epoch {e} exact" for e in range(epochs)], out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        daemon.stop()


def test_a_child_forked_while_another_thread_is_in_a_call_is_told_instead_of_hanging(workdir):
    with daemon_with_synth(workdir) as daemon:
        r = run_script(workdir, daemon, FORKED_DURING_A_CALL)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("9 this process was forked from process")
    assert "while another thread was in a Joader call" in lines[0] and "'spawn'" in lines[0], lines[0]
    assert lines[1:] == ["parent ok"], r.stdout


def test_a_spawned_worker_uses_joader(workdir):
    with daemon_with_synth(workdir) as daemon:
        r = run_script(workdir, daemon, SPAWNED_WORKER, timeout=120)
    assert r.stdout.strip() == "True", r.stdout + r.stderr[-3000:]


def test_the_readmes_training_example_runs_with_a_9000x3000_photo_in_the_folder(workdir, tmp_path):
    # Reserving the largest item for every decided item would need 32 × 81 MB for one batch; each
    # item's stored size makes the photo cost only itself.
    from PIL import Image
    import torch
    import torchvision.transforms as T

    def save(path, n, target):
        if n == 0:
            with Image.open(path) as im:
                im.convert("RGB").resize((9000, 3000)).save(target / "huge.jpg", quality=90)
        else:
            os.replace(path, target / f"{n:02d}{path.suffix}")

    folder = photo_imagefolder(tmp_path, 40, 60, 300, save=save)
    daemon = Daemon(workdir, cache_size="512MiB")
    try:
        client = joader.Client(daemon.socket)
        n = client.add_dataset("train", source=f"imagefolder:{folder}")["items"]
        assert n == 40
        loader = joader.torch.DataLoader("train", batch_size=32, epochs=2, dtype=torch.float32, client=client,
                                         augment=T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]))
        for epoch in range(2):
            seen = []
            for images, labels in loader:
                assert images.dtype == torch.float32 and tuple(images.shape[1:]) == (3, 224, 224)
                seen.extend(labels.tolist())
            assert len(seen) == n, f"epoch {epoch}"
    finally:
        daemon.stop()
