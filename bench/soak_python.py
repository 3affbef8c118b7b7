#!/usr/bin/env python3
"""Soak of the Python client (issue 41; a bench, not CI): one daemon, ≥ 16 concurrent
joader.torch.DataLoader jobs in their own processes for --duration seconds, taking every path users
take, every completed epoch of every job checked.

    /usr/bin/python3 bench/soak_python.py --build build --duration 600 [--jobs 16] [--busy 2]

Datasets: an ImageFolder of BUILD/make_images JPEGs (64x56, 6 classes) given to the loaders as a
torchvision dataset object (the loader registers it), and the same folder registered by name.
Each job is one process (or two: the ranks of a data-parallel job) running a stock loop
`for epoch in range(E): for x, y, ids in loader: ...`, with random:
  * the path: a dataset object with a native recipe (RandomResizedCrop + flip, in C++), a dataset
    object with a PIL transform of its own (the Python pool, num_workers 0, 1 or 2), an ordered
    val job (shuffle=False, Resize + CenterCrop: its pixels are hashed), or a data-parallel job
    of two ranks (rank=/world_size=);
  * a subset (a Subset fold, or all), batch 1..24, drop_last, 2..4 epochs, prefetch 1..4;
  * `break` out of a pass now and then, and a new pass that continues the epoch.
Events while the clock runs: a job's process SIGKILLed or sent SIGINT (Ctrl-C), then resumed in a
new process from the state_dict() it saved after its last batch; the daemon SIGKILLed and started
again on the same socket while jobs wait (their loaders reconnect); `--busy` busy loops beside.

Checked (any failure: exit status 1): every process exits 0 or dies of our signal; every completed
epoch of every job holds each item of its subset exactly once (drop_last: n - n % B distinct items;
ordered jobs: in the subset's order; the ranks of a data-parallel job: together, with
DistributedSampler's padding), the epoch a process was killed in counting what it yielded up to its
last saved state and what its successor yielded; labels are the folder's; an ordered job's pixels
hash the same for an item in every job and epoch; no job goes --hang-s seconds without a batch.
"""
import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


# ----------------------------------------------------------------------------------------------
# A job's process

class Posterize:
    """A user's own PIL transform: Joader runs it in its Python pool."""

    def __call__(self, img):
        from PIL import ImageOps
        return ImageOps.posterize(img, 4)


def worker(spec):
    import torch
    import torchvision.transforms as T
    from torch.utils.data import Subset
    from torchvision import datasets
    from joader.torch import DataLoader

    torch.set_num_threads(1)
    kind = spec["kind"]
    if kind == "native":
        transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    elif kind == "pool":
        transform = T.Compose([T.RandomResizedCrop(24), Posterize(), T.ToTensor()])
    else:  # ordered, ddp: deterministic pixels
        transform = T.Compose([T.Resize(28), T.CenterCrop(24), T.ToTensor()])
    base = datasets.ImageFolder(spec["root"], transform=transform)
    data = Subset(base, spec["indices"]) if spec["indices"] is not None else base
    state = None
    if os.path.exists(spec["state_path"]):
        with open(spec["state_path"]) as f:
            saved = json.load(f)
        state, printed = saved["state"], saved["printed"]
    else:
        printed = 0
    kwargs = dict(batch_size=spec["batch"], drop_last=spec["drop_last"], prefetch=spec["prefetch"], state=state,
                  with_indices=True, name=spec["name"])
    if kind == "pool":
        kwargs["num_workers"] = spec["num_workers"]
    if kind == "ordered":
        kwargs["shuffle"] = False
    else:
        kwargs["shuffle"] = True
    if kind == "ddp":
        kwargs.update(rank=spec["rank"], world_size=spec["world"])
    loader = DataLoader(data, **kwargs)
    rng = random.Random(spec["seed"] * 1000 + printed)
    out = sys.stdout
    epoch = loader.state_dict()["epoch"]
    while epoch < spec["epochs"]:
        for x, y, ids in loader:
            ids = ids.tolist()
            labels = y.tolist()
            bad = [i for i, label in zip(ids, labels) if base.targets[i] != label]
            line = {"e": epoch, "ids": ids}
            if bad:
                line["bad_labels"] = bad
            if kind in ("ordered", "ddp"):
                line["h"] = [hashlib.blake2b(x[k].numpy().tobytes(), digest_size=8).hexdigest() for k in range(len(ids))]
            out.write(json.dumps(line) + "\n")
            out.flush()
            printed += 1
            tmp = spec["state_path"] + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"state": loader.state_dict(), "printed": printed}, f)
            os.replace(tmp, spec["state_path"])
            time.sleep(rng.uniform(0, spec["step_s"]))  # the training step
            if rng.random() < spec["break_p"]:
                break  # out of the pass; the next pass continues the epoch
        epoch = loader.state_dict()["epoch"]
    out.write(json.dumps({"done": True}) + "\n")
    out.flush()


# ----------------------------------------------------------------------------------------------
# The controller

class Proc:
    """One process of a job: its output lines, read as they come."""

    def __init__(self, spec, env, err_path):
        self.spec = spec
        self.err_path = err_path
        with open(err_path, "w") as err:  # a file, not a pipe: a chatty process never blocks on it
            self.popen = subprocess.Popen([sys.executable, HERE, "--worker", json.dumps(spec)], env=env,
                                          stdout=subprocess.PIPE, stderr=err, text=True)
        os.set_blocking(self.popen.stdout.fileno(), False)
        self.buffer = ""
        self.lines = []
        self.last_batch = time.monotonic()
        self.signalled = None
        self.stopped_since = None

    def read(self):
        try:
            chunk = self.popen.stdout.read()
        except (BlockingIOError, TypeError):
            chunk = None
        if chunk:
            self.buffer += chunk
            *whole, self.buffer = self.buffer.split("\n")
            for text in whole:
                self.lines.append(json.loads(text))
                self.last_batch = time.monotonic()


class Job:
    """A job of one process at a time (or of `world` ranks), resumed in new processes after kills."""

    def __init__(self, n, spec):
        self.n = n
        self.spec = spec
        self.procs = {}  # rank -> current Proc
        self.batches = collections.defaultdict(list)  # rank -> the batch lines that count, in order
        self.finished = set()


def check_job(job, subset, hashes, failures):
    spec = job.spec
    world = spec.get("world", 1)
    n, b = len(subset), spec["batch"]
    for epoch in range(spec["epochs"]):
        per_rank = [[i for line in job.batches[r] if line["e"] == epoch for i in line["ids"]] for r in range(world)]
        got = [i for part in per_rank for i in part]
        where = f"job {job.n} ({spec['kind']}, batch {b}, drop_last {spec['drop_last']}, {n} items) epoch {epoch}"
        if world > 1:
            expected = n + (-n % world)
            if sorted(set(got)) != sorted(subset) or len(got) != expected:
                failures.append(f"{where}: the ranks got {len(got)} items, {len(set(got))} distinct (expected "
                                f"{expected}, every item)")
            continue
        if spec["drop_last"]:
            if len(got) != n - n % b or len(set(got)) != len(got) or not set(got) <= set(subset):
                failures.append(f"{where}: {len(got)} items, {len(set(got))} distinct, expected {n - n % b}")
        elif sorted(got) != sorted(subset):
            missing = sorted(set(subset) - set(got))[:10]
            extra = [i for i, c in collections.Counter(got).items() if c > 1][:10]
            failures.append(f"{where}: {len(got)} items; missing {missing}, duplicated {extra}")
        if spec["kind"] == "ordered" and got != subset[: len(got)]:
            failures.append(f"{where}: not in the dataset's order")
    for r in range(world):
        for line in job.batches[r]:
            if line.get("bad_labels"):
                failures.append(f"job {job.n}: wrong labels for items {line['bad_labels'][:5]}")
            for i, h in zip(line["ids"], line.get("h", [])):
                if hashes.setdefault(i, h) != h:
                    failures.append(f"job {job.n}: item {i}'s pixels differ from another delivery's")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--build", default="build")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kill-rate", type=float, default=0.05, help="SIGKILL or SIGINT of a job's process per second")
    ap.add_argument("--daemon-kill-every", type=float, default=120, help="seconds between daemon SIGKILLs")
    ap.add_argument("--hang-s", type=float, default=60)
    args = ap.parse_args()
    if args.worker:
        return worker(json.loads(args.worker))

    rng = random.Random(args.seed)
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="soakpy-")
    os.chmod(work, 0o700)
    root = os.path.join(work, "images")
    subprocess.run([os.path.join(build, "make_images"), root, "--classes", "6", "--per-class", "50", "--size", "64x56"],
                   check=True)
    from torchvision import datasets
    targets = datasets.ImageFolder(root).targets
    items = len(targets)
    socket = os.path.join(work, "j.sock")
    # The loaders start the daemon themselves (and again after it is killed), as a user's would.
    joader = os.path.join(build, "joader")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), JOADER_SOCKET=socket, JOADER_AUTOSTART="1",
               JOADER_BIN=joader, JOADER_CACHE_SIZE="96MiB")

    def daemon_pid():
        got = subprocess.run([joader, "status", "--json", "--socket", socket], capture_output=True, text=True)
        return json.loads(got.stdout)["pid"] if got.returncode == 0 else None

    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.busy)]
    jobs, done, failures = [], [], []
    hashes = {}
    counts = collections.Counter()
    started = time.monotonic()
    next_daemon_kill = started + args.daemon_kill_every
    next_report = started + 30

    def new_job():
        n = len(jobs) + len(done)
        kind = rng.choice(["native", "native", "pool", "ordered", "ddp"])
        fold = rng.random() < 0.6
        indices = sorted(rng.sample(range(items), rng.randint(20, items))) if fold else None
        spec = {"kind": kind, "root": root, "indices": indices, "batch": rng.randint(1, 24),
                "drop_last": rng.random() < 0.3, "epochs": rng.randint(2, 4), "prefetch": rng.randint(1, 4),
                "num_workers": rng.choice([0, 1, 2]), "seed": n, "step_s": rng.choice([0.0, 0.01, 0.05]),
                "break_p": rng.choice([0.0, 0.0, 0.05]), "name": f"soak-{n}"}
        if kind == "ddp":
            spec["world"] = 2
            spec["drop_last"] = False  # a rank's own last batch would be dropped: the ranks' union is the check
        job = Job(n, spec)
        for r in range(spec.get("world", 1)):
            job.procs[r] = launch(job, r)
        jobs.append(job)
        counts["jobs"] += 1

    def launch(job, rank):
        spec = dict(job.spec, rank=rank, state_path=os.path.join(work, f"job{job.n}-{rank}.json"),
                    name=f"{job.spec['name']}-r{rank}")
        counts["processes"] += 1
        return Proc(spec, env, os.path.join(work, f"job{job.n}-{rank}-{counts['processes']}.err"))

    def subset_of(job):
        return job.spec["indices"] if job.spec["indices"] is not None else list(range(items))

    try:
        while True:
            now = time.monotonic()
            running = now - started < args.duration
            if not running and not jobs:
                break
            while running and len(jobs) < args.jobs:
                new_job()
            if running and now >= next_daemon_kill:
                pid = daemon_pid()
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    counts["daemon_kills"] += 1
                next_daemon_kill = now + args.daemon_kill_every
            for job in list(jobs):
                for rank, proc in list(job.procs.items()):
                    proc.read()
                    code = proc.popen.poll()
                    if code is None:
                        if now - proc.last_batch > args.hang_s:
                            failures.append(f"job {job.n} rank {rank} ({job.spec['kind']}): no batch for "
                                            f"{now - proc.last_batch:.0f} s")
                            proc.popen.kill()
                            proc.signalled = "hang"
                        elif (running and job.spec["kind"] != "ddp" and proc.signalled is None
                              and rng.random() < args.kill_rate * 0.05 / max(1, len(jobs))):
                            sig = rng.choice([signal.SIGKILL, signal.SIGINT])
                            proc.popen.send_signal(sig)
                            proc.signalled = sig
                            counts["sigkill" if sig == signal.SIGKILL else "sigint"] += 1
                        continue
                    proc.read()
                    lines = proc.lines
                    with open(proc.err_path) as f:
                        err = f.read()
                    if code == 0 and lines and lines[-1].get("done"):
                        job.batches[rank] += [line for line in lines if "ids" in line]
                        job.finished.add(rank)
                        del job.procs[rank]
                    elif proc.signalled is not None and proc.signalled != "hang":
                        # Resumed from its saved state: what it yielded up to that state counts.
                        state_path = proc.spec["state_path"]
                        printed = 0
                        if os.path.exists(state_path):
                            with open(state_path) as f:
                                printed = json.load(f)["printed"]
                        mine = [line for line in lines if "ids" in line]
                        already = len(job.batches[rank])
                        job.batches[rank] += mine[: max(0, printed - already)]
                        job.procs[rank] = launch(job, rank)
                        counts["resumed"] += 1
                    else:
                        failures.append(f"job {job.n} rank {rank} ({job.spec['kind']}) exited {code}:\n{err[-2000:]}")
                        del job.procs[rank]
                        job.finished.add(rank)
                if len(job.finished) == job.spec.get("world", 1):
                    jobs.remove(job)
                    done.append(job)
                    before = len(failures)
                    check_job(job, subset_of(job), hashes, failures)
                    counts["epochs_checked"] += job.spec["epochs"]
                    if len(failures) > before:
                        print("\n".join(failures[before:]), flush=True)
            time.sleep(0.05)
            if now >= next_report:
                print(f"{now - started:5.0f} s: {len(jobs)} running, {len(done)} done, {dict(counts)}, "
                      f"{len(failures)} failures", flush=True)
                next_report = now + 30
    finally:
        for job in jobs:
            for proc in job.procs.values():
                proc.popen.kill()
        stop = subprocess.run([joader, "stop", "--socket", socket], capture_output=True, text=True, timeout=120)
        if stop.returncode != 0:
            failures.append(f"joader stop: {stop.stderr}")
        for b in busy:
            b.kill()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{len(done)} jobs, {counts['epochs_checked']} epochs checked; {counts['sigkill']} SIGKILLs, "
          f"{counts['sigint']} Ctrl-Cs, {counts['resumed']} resumes, {counts['daemon_kills']} daemon SIGKILLs; "
          f"{len(failures)} failures")
    for f in failures[:20]:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
