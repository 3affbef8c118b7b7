#!/usr/bin/env python3
"""Soak benchmark (issue 6; a bench, not CI): one `joader serve`, 4 datasets, ~32 concurrent jobs
joining, leaving and being killed at random for --duration seconds.

    /usr/bin/python3 bench/soak.py --build build --duration 600 --out docs/soak_results.json
    /usr/bin/python3 bench/soak.py --build build --duration 720 --jobs 16 --hang-s 120 \
        --daemon-prefix 'valgrind --tool=massif --massif-out-file=massif.out'   # the live heap (ms_print)

What runs. One daemon (private socket, `--state none`, a 64 MiB arena: the 4 datasets hold
~100 MiB once prepared, so the cache evicts all the time) with 4 datasets:
  folder-a   imagefolder, 3000 JPEGs 128x96 in 10 classes, --resize 80 --crop 64 (12 KiB items)
  folder-b   imagefolder, 1000 JPEGs 64x48 in 4 classes, --crop 48 (6.75 KiB items)
  synth      synthetic:4000:96x72, --crop 64 (12 KiB items, each load encodes then decodes a JPEG)
  raw-a      the JPEG files of folder-a, --raw (6-7.5 KiB, every item a different size)
The images are generated once per run by `BUILD/make_images`. Jobs are `BUILD/joader_test_client`
processes with random parameters (fixed --seed): dataset; subset (the whole dataset, a range, or
a random sample of 1..n ids in random order); batch 1..64; prefetch 1..8; 1-3 epochs; drop_last
sometimes; a speed of 20-2000 items/s (--delay-ms/--jitter-ms per batch; a few run flat out); a
fraction (--verify-frac) also prepare every item themselves and compare bytes (--verify-source).
While the clock runs, ~--jobs jobs are kept alive: a finished job is replaced after a random
delay; at random moments a running job is SIGKILLed (--kill-rate per second), told to leave with
SIGTERM or SIGINT (--leave-rate), or SIGSTOPped for 1-8 s then SIGCONTed (--stop-rate). Half of
the killed jobs come back as a resumed job (--resume-epoch/--resume-consumed with exactly the items
the dead process printed), as a training job restarted from its state_dict would.

What is checked (any failure: exit status 1):
  * every job that ends by itself exits 0, every signalled one dies of our signal; anything else
    (error from the daemon, verification failure, crash) is a failure, shown with its stderr;
  * every completed epoch is exact: each id of the subset exactly once (with drop_last: distinct
    ids of the subset, n - n % batch of them). Epochs completed before a kill count too, and a
    resumed epoch is the union of what the dead process and its successor printed. The epoch a
    job was killed in holds no duplicate and no foreign id;
  * labels are right (class index for the folders, id % 10 for synth) and every (dataset, id)
    has one FNV-1a hash across all jobs, epochs and cache reloads (no torn or stale arena bytes);
  * no job goes --hang-s seconds without receiving a batch (unless we stopped it);
  * every --sample-s: the daemon's VmRSS (and RssAnon/RssShmem), open fds, threads, and
    `joader status --json`; cache_bytes and pinned_bytes never exceed the arena;
  * RSS flat: median of the first third of the samples after --warmup-s against the last third;
    growth above --rss-growth (20 %) fails, for VmRSS and for RssAnon (the heap);
    fds flat: the last third's median at most 20 % + 4 above the first third's;
  * at the end (no new jobs, the running ones finish): within 10 s `joader status` shows 0 jobs
    and pinned_bytes == 0; the fd count is back to its idle baseline (taken after one priming job
    per dataset); after `joader dataset rm` of all datasets cache_bytes == 0 and the fds are
    back to the count before the datasets were added; SIGTERM stops the daemon with status 0.
The summary is printed; --out FILE writes it as JSON with the whole time series.
"""
import argparse
import collections
import json
import math
import os
import random
import shutil
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from daemon_process import Daemon as SharedDaemon, cpu_seconds  # noqa: E402  (python/joader/daemon.py)

MiB = 1 << 20


# ----------------------------------------------------------------------------------------------
# The daemon


class Daemon(SharedDaemon):
    def __init__(self, build, workdir, cache_size, threads, prefix=(), policy="refcnt"):
        super().__init__(os.path.join(build, "joader"), workdir, cache_size=cache_size, threads=threads,
                         extra=("--state", "none", "--policy", policy), prefix=prefix, timeout=120 if prefix else 15)

    def proc_stats(self):
        """VmRSS, RssAnon, RssShmem (KiB), Threads from /proc/PID/status; open fds."""
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssShmem", "RssFile", "VmHWM", "Threads"):
                    out[key] = int(value.split()[0])
        out["fds"] = len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        out["cpu_s"] = cpu_seconds(self.proc.pid)
        return out

    def stop_timed(self, timeout=15):
        """SIGTERM; returns (exit status, seconds) or (None, timeout) if it had to be killed."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
            return self.proc.returncode, time.monotonic() - start
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, timeout


# ----------------------------------------------------------------------------------------------
# Datasets


def make_datasets(build, workdir):
    make_images = os.path.join(build, "make_images")
    root_a, root_b = os.path.join(workdir, "folder-a"), os.path.join(workdir, "folder-b")
    subprocess.run([make_images, root_a, "--classes", "10", "--per-class", "300", "--size", "128x96"], check=True)
    subprocess.run([make_images, root_b, "--classes", "4", "--per-class", "250", "--size", "64x48"], check=True)
    return [
        {"name": "folder-a", "source": f"imagefolder:{root_a}", "prep": ["--resize", "80", "--crop", "64"],
         "items": 3000, "label": lambda i: i // 300},
        {"name": "folder-b", "source": f"imagefolder:{root_b}", "prep": ["--crop", "48"],
         "items": 1000, "label": lambda i: i // 250},
        {"name": "synth", "source": "synthetic:4000:96x72", "prep": ["--crop", "64"],
         "items": 4000, "label": lambda i: i % 10},
        {"name": "raw-a", "source": f"imagefolder:{root_a}", "prep": ["--raw"],
         "items": 3000, "label": lambda i: i // 300},
    ]


# ----------------------------------------------------------------------------------------------
# Jobs


class Job:
    """One client process. `carry` holds, for a resumed job, the ids its dead predecessors
    printed in `first_epoch`; the job's epochs run from first_epoch to epochs - 1."""

    def __init__(self, jid, spec, first_epoch=0, carry=(), parent=None):
        self.id, self.spec, self.first_epoch, self.carry, self.parent = jid, spec, first_epoch, list(carry), parent
        self.proc = None
        self.signal = None          # the signal we sent to end it (SIGKILL, SIGTERM, SIGINT)
        self.stopped_until = None   # SIGSTOPped until this time
        self.last_size = 0
        self.last_progress = 0.0
        self.start = 0.0

    def command(self, build, socket):
        s = self.spec
        cmd = [os.path.join(build, "joader_test_client"), "--socket", socket, "--dataset", s["dataset"],
               "--name", f"soak-{self.id}", "--batch", str(s["batch"]), "--epochs", str(s["epochs"]),
               "--prefetch", str(s["prefetch"]), "--delay-ms", f"{s['delay_ms']:.3f}",
               "--jitter-ms", f"{s['jitter_ms']:.3f}"]
        if s["ids_arg"] is not None:
            cmd += ["--ids", s["ids_arg"]]
        if s["drop_last"]:
            cmd.append("--drop-last")
        if s["verify"]:
            cmd += ["--verify-source", s["source"], *s["prep"]]
        if self.first_epoch > 0 or self.carry:
            cmd += ["--resume-epoch", str(self.first_epoch)]
            if self.carry:
                cmd += ["--resume-consumed", ",".join(map(str, self.carry))]
        return cmd


def random_spec(rng, datasets, max_job_s, verify_frac):
    ds = rng.choice(datasets)
    n_all = ds["items"]
    batch = rng.choice([1, 2, 3, 5, 8, 16, 16, 32, 32, 64])
    epochs = rng.choice([1, 1, 2, 2, 3])
    fast = rng.random() < 0.05
    ips = 5000.0 if fast else math.exp(rng.uniform(math.log(20), math.log(2000)))  # items/s
    delay_ms = 0.0 if fast else 1000.0 * batch / ips
    jitter_ms = delay_ms * rng.uniform(0, 0.6)
    n_max = max(1, int(max_job_s * ips / epochs))
    kind = rng.random()
    if kind < 0.3 and n_all <= n_max:
        ids, ids_arg = list(range(n_all)), None                        # the whole dataset
    elif kind < 0.6:
        n = rng.randint(1, min(n_all, n_max))
        lo = rng.randint(0, n_all - n)
        ids, ids_arg = list(range(lo, lo + n)), f"{lo}:{lo + n}"       # a range
    else:
        n = min(n_max, rng.choice([1, 2, rng.randint(1, 50), rng.randint(1, n_all), rng.randint(1, n_all)]))
        ids = rng.sample(range(n_all), n)                              # a random sample, random order
        ids_arg = ",".join(map(str, ids))
    return {"dataset": ds["name"], "source": ds["source"], "prep": ds["prep"], "ids": ids, "ids_arg": ids_arg,
            "batch": batch, "epochs": epochs, "prefetch": rng.choice([1, 2, 4, 4, 8]),
            "drop_last": rng.random() < 0.15, "verify": rng.random() < verify_frac,
            "delay_ms": delay_ms, "jitter_ms": jitter_ms}


def describe(job):
    s = job.spec
    ids = s["ids_arg"] if s["ids_arg"] is None or len(s["ids_arg"]) < 60 else s["ids_arg"][:60] + "..."
    return (f"job soak-{job.id} ({s['dataset']}, {len(s['ids'])} ids {ids or 'all'}, batch {s['batch']}, "
            f"epochs {s['epochs']} from {job.first_epoch}{' carrying %d' % len(job.carry) if job.carry else ''}, "
            f"prefetch {s['prefetch']}, delay {s['delay_ms']:.1f}+{s['jitter_ms']:.1f} ms"
            f"{', drop_last' if s['drop_last'] else ''}{', verify' if s['verify'] else ''})")


# ----------------------------------------------------------------------------------------------
# The soak


class Soak:
    def __init__(self, args, daemon, datasets, workdir):
        self.args, self.daemon, self.workdir = args, daemon, workdir
        self.datasets = {d["name"]: d for d in datasets}
        self.rng = random.Random(args.seed)
        self.running = {}           # id -> Job
        self.resumes = []           # jobs waiting to be started
        self.next_id = 0
        self.hashes = {}            # (dataset, id) -> FNV-1a of its bytes
        self.failures = []
        self.counts = {k: 0 for k in ("started", "completed", "killed", "left", "stopped", "resumed",
                                      "verified", "epochs_completed", "epochs_exact", "items_printed")}
        self.samples = []
        self.phase = "run"          # "drain" once no more jobs are started
        self.drain_s = None

    # --- failures and checks
    def fail(self, what, job=None, detail=""):
        msg = what + (f": {describe(job)}" if job else "") + (f"\n    {detail}" if detail else "")
        self.failures.append(msg)
        print("FAIL " + msg, file=sys.stderr, flush=True)

    def parse_output(self, job):
        """{epoch: [ids]} from the job's complete lines (None if one is malformed); checks labels and
        hashes on the way."""
        path = os.path.join(self.workdir, "jobs", f"{job.id}.out")
        with open(path) as f:
            text = f.read()
        lines = text.split("\n")
        if lines and lines[-1] != "":
            if job.signal is None:
                self.fail("truncated output line", job, repr(lines[-1]))
        lines = lines[:-1]  # the part after the last newline: empty, or cut by a kill
        ds = self.datasets[job.spec["dataset"]]
        epochs = {}
        bad = 0
        for line in lines:
            try:
                e, i, label, h = (int(x) for x in line.split())
            except ValueError:
                self.fail("malformed output line", job, repr(line))
                return None
            epochs.setdefault(e, []).append(i)
            if label != ds["label"](i) and bad < 3:
                bad += 1
                self.fail("wrong label", job, f"epoch {e} item {i}: label {label}, expected {ds['label'](i)}")
            key = (ds["name"], i)
            if self.hashes.setdefault(key, h) != h and bad < 3:
                bad += 1
                self.fail("bytes differ between deliveries", job,
                          f"epoch {e} item {i}: FNV-1a {h:016x}, earlier {self.hashes[key]:016x}")
        self.counts["items_printed"] += len(lines)
        return epochs

    def check_epoch(self, job, e, ids, complete):
        """Checks one epoch's ids; `complete`: the job finished it. Returns True if exact."""
        s = job.spec
        subset, n = set(s["ids"]), len(s["ids"])
        seen = set(ids)
        dups = len(ids) - len(seen)
        foreign = seen - subset
        want = n - n % s["batch"] if s["drop_last"] else n
        if dups or foreign:
            dup_ids = sorted(i for i, k in collections.Counter(ids).items() if k > 1)[:10]
            self.fail(f"epoch {e} inexact", job, f"{dups} duplicates {dup_ids}, foreign ids {sorted(foreign)[:10]}")
            return False
        if complete and len(seen) != want:
            missing = sorted(subset - seen)[:10]
            self.fail(f"epoch {e} inexact", job, f"{len(seen)} of {want} ids; missing e.g. {missing}")
            return False
        return True

    def finish(self, job):
        """The job's process has exited: classify and check it."""
        rc = job.proc.returncode
        s = job.spec
        with open(os.path.join(self.workdir, "jobs", f"{job.id}.err")) as f:
            err = f.read().strip()
        expected_signal = job.signal is not None and rc == -job.signal
        if rc != 0 and not expected_signal:
            self.fail(f"client exited with {rc}" + (f" (we sent {signal.Signals(job.signal).name})" if job.signal else ""),
                      job, "stderr: " + (err[-2000:] or "(empty)"))
            self.keep_logs(job)
            return
        got = self.parse_output(job)
        if got is None:
            self.keep_logs(job)
            return
        if job.carry:
            got.setdefault(job.first_epoch, [])
            got[job.first_epoch] = job.carry + got[job.first_epoch]
        outside = [e for e in got if not job.first_epoch <= e < s["epochs"]]
        if outside:
            self.fail(f"items delivered in epochs {outside} outside [{job.first_epoch}, {s['epochs']})", job)
        ok = True
        if rc == 0:                                       # ran to its end: every epoch complete
            self.counts["completed"] += 1
            self.counts["verified"] += s["verify"]
            for e in range(job.first_epoch, s["epochs"]):
                exact = self.check_epoch(job, e, got.get(e, []), complete=True)
                ok &= exact
                self.counts["epochs_completed"] += 1
                self.counts["epochs_exact"] += exact
        else:                                             # killed or left mid-way
            self.counts["killed" if job.signal == signal.SIGKILL else "left"] += 1
            last = max(got, default=job.first_epoch)
            for e in range(job.first_epoch, last + 1):
                ids = got.get(e, [])
                want = len(s["ids"]) - len(s["ids"]) % s["batch"] if s["drop_last"] else len(s["ids"])
                complete = e < last or (ids and len(set(ids)) == want)
                exact = self.check_epoch(job, e, ids, complete=complete)
                ok &= exact
                if complete:
                    self.counts["epochs_completed"] += 1
                    self.counts["epochs_exact"] += exact
            if (job.signal == signal.SIGKILL and not s["drop_last"] and ok
                    and self.rng.random() < self.args.resume_prob):
                consumed = got.get(last, [])
                if len(set(consumed)) == len(s["ids"]):
                    last, consumed = last + 1, []
                if last < s["epochs"]:
                    self.resumes.append(Job(None, s, first_epoch=last, carry=consumed, parent=job.id))
        if not ok:
            self.keep_logs(job)
        else:
            for ext in ("out", "err"):
                os.unlink(os.path.join(self.workdir, "jobs", f"{job.id}.{ext}"))

    def keep_logs(self, job):
        with open(os.path.join(self.workdir, "jobs", f"{job.id}.cmd"), "w") as f:
            f.write(" ".join(job.command(self.args.build, self.daemon.socket)) + "\n")
        self.args.keep = True

    # --- job control
    def spawn(self, job):
        job.id = self.next_id
        self.next_id += 1
        out = open(os.path.join(self.workdir, "jobs", f"{job.id}.out"), "w")
        err = open(os.path.join(self.workdir, "jobs", f"{job.id}.err"), "w")
        job.proc = subprocess.Popen(job.command(self.args.build, self.daemon.socket),
                                    stdout=out, stderr=err)
        out.close()
        err.close()
        job.start = job.last_progress = time.monotonic()
        self.running[job.id] = job
        self.counts["started"] += 1
        self.counts["resumed"] += job.parent is not None

    def reap(self, now):
        for jid, job in list(self.running.items()):
            if job.proc.poll() is not None:
                del self.running[jid]
                self.finish(job)
                continue
            if job.stopped_until is not None:
                if now >= job.stopped_until:
                    job.proc.send_signal(signal.SIGCONT)
                    job.stopped_until = None
                    job.last_progress = now
                continue
            size = os.path.getsize(os.path.join(self.workdir, "jobs", f"{jid}.out"))
            if size != job.last_size:
                job.last_size, job.last_progress = size, now
            elif now - job.last_progress > self.args.hang_s and job.signal is None:
                try:
                    mine = [j for j in self.daemon.status()["jobs"] if j["name"] == f"soak-{jid}"]
                except Exception as e:  # noqa: BLE001 - report whatever the status call says
                    mine = repr(e)
                self.fail(f"no batch for {now - job.last_progress:.0f} s (hang)", job, f"daemon says: {mine}")
                self.keep_logs(job)
                job.signal = signal.SIGKILL
                job.proc.kill()

    def chaos(self, dt):
        live = [j for j in self.running.values() if j.signal is None]
        if not live:
            return
        a, rng = self.args, self.rng
        if rng.random() < a.kill_rate * dt:
            job = rng.choice(live)
            job.signal = signal.SIGKILL
            job.proc.send_signal(signal.SIGKILL)
        awake = [j for j in live if j.stopped_until is None and j.signal is None]
        if awake and rng.random() < a.leave_rate * dt:
            job = rng.choice(awake)
            job.signal = rng.choice([signal.SIGTERM, signal.SIGINT])
            job.proc.send_signal(job.signal)
        awake = [j for j in awake if j.signal is None]
        if awake and rng.random() < a.stop_rate * dt:
            job = rng.choice(awake)
            job.proc.send_signal(signal.SIGSTOP)
            job.stopped_until = time.monotonic() + rng.uniform(1, 8)
            self.counts["stopped"] += 1

    def fill(self, dt):
        missing = self.args.jobs - len(self.running)
        for _ in range(max(0, missing)):
            if self.rng.random() < dt / self.args.join_delay_s:   # joins arrive after ~join_delay_s
                if self.resumes:
                    self.spawn(self.resumes.pop(0))
                else:
                    self.spawn(Job(None, random_spec(self.rng, list(self.datasets.values()),
                                                    self.args.max_job_s, self.args.verify_frac)))

    # --- sampling
    def sample(self, t0):
        st = self.daemon.proc_stats()
        s = self.daemon.status()
        row = {"t": round(time.monotonic() - t0, 1), "phase": self.phase, "rss_kib": st["VmRSS"], "rss_anon_kib": st.get("RssAnon"),
               "rss_shmem_kib": st.get("RssShmem"), "hwm_kib": st.get("VmHWM"), "fds": st["fds"],
               "threads": st["Threads"], "cpu_s": round(st["cpu_s"], 2), "daemon_jobs": len(s["jobs"]), "live_jobs": len(self.running),
               "pinned_bytes": s["pinned_bytes"], "cache_bytes": s["cache_bytes"], "loads": s["loads"],
               "deliveries": s["deliveries"], "hits": s["hits"], "evictions": s["evictions"],
               "cached_items": s["cached_items"], "cached_blocks": s["cached_blocks"],
               **{k: self.counts[k] for k in ("completed", "killed", "left", "resumed", "epochs_completed")},
               "failures": len(self.failures)}
        if s["cache_bytes"] > s["cache_capacity"] or s["pinned_bytes"] > s["cache_capacity"]:
            self.fail(f"cache accounting beyond the arena at t={row['t']}: cache_bytes {s['cache_bytes']}, "
                      f"pinned_bytes {s['pinned_bytes']}, capacity {s['cache_capacity']}")
        prev = self.samples[-1] if self.samples else None
        cpu = 100 * (row["cpu_s"] - prev["cpu_s"]) / (row["t"] - prev["t"]) if prev and row["t"] > prev["t"] else 0.0
        self.samples.append(row)
        ld = s["loads"] / s["deliveries"] if s["deliveries"] else 0
        print(f"[{row['t']:6.0f}s] rss {st['VmRSS'] / 1024:6.1f} MiB (anon {st.get('RssAnon', 0) / 1024:5.1f}, "
              f"shm {st.get('RssShmem', 0) / 1024:5.1f})  fds {st['fds']:4d}  thr {st['Threads']:3d} cpu {cpu:3.0f} % | "
              f"jobs {row['daemon_jobs']:2d} (ours {row['live_jobs']:2d}) | pinned {s['pinned_bytes'] / MiB:5.1f} "
              f"cache {s['cache_bytes'] / MiB:5.1f} MiB ({s['cached_items']} items, {s['cached_blocks']} blocks) | loads {s['loads']} deliv {s['deliveries']} L/D {ld:.3f} "
              f"evict {s['evictions']} | done {self.counts['completed']} killed {self.counts['killed']} "
              f"left {self.counts['left']} resumed {self.counts['resumed']} | epochs "
              f"{self.counts['epochs_exact']}/{self.counts['epochs_completed']} exact | failures {len(self.failures)}",
              flush=True)
        return row

    def run(self):
        a = self.args
        tick = 0.2
        t0 = time.monotonic()
        next_sample = t0
        last = t0
        while True:
            now = time.monotonic()
            if now - t0 >= a.duration:
                break
            if self.daemon.proc.poll() is not None:
                self.fail(f"the daemon died with status {self.daemon.proc.returncode}",
                          detail=self.daemon.output()[-3000:])
                return t0
            dt, last = now - last, now
            self.reap(now)
            self.chaos(dt)
            self.fill(dt)
            if now >= next_sample:
                self.sample(t0)
                next_sample += a.sample_s
            time.sleep(tick)
        # Drain: no new jobs, no more signals; stopped jobs continue; the rest finish by themselves.
        print(f"[{time.monotonic() - t0:6.0f}s] draining {len(self.running)} jobs "
              f"({len(self.resumes)} queued resumes dropped)", flush=True)
        self.phase = "drain"
        drain_start = time.monotonic()
        for job in self.running.values():
            if job.stopped_until is not None:
                job.proc.send_signal(signal.SIGCONT)
                job.stopped_until = None
                job.last_progress = time.monotonic()
        deadline = time.monotonic() + a.drain_s
        while self.running and time.monotonic() < deadline and self.daemon.proc.poll() is None:
            self.reap(time.monotonic())
            if time.monotonic() >= next_sample:
                self.sample(t0)
                next_sample += a.sample_s
            time.sleep(tick)
        for job in list(self.running.values()):
            self.fail(f"still running {a.drain_s:.0f} s after the end", job)
            self.keep_logs(job)
            job.signal = signal.SIGKILL
            job.proc.kill()
            job.proc.wait()
            del self.running[job.id]
        self.drain_s = time.monotonic() - drain_start
        print(f"[{time.monotonic() - t0:6.0f}s] drained in {self.drain_s:.1f} s", flush=True)
        return t0


# ----------------------------------------------------------------------------------------------
# Verdicts


def growth_check(samples, key, warmup_s, limit):
    after = [r[key] for r in samples if r["phase"] == "run" and r["t"] >= warmup_s and r.get(key) is not None]
    if len(after) < 3:
        return {"ok": True, "detail": f"n/a: {len(after)} samples after the warm-up (need 3)"}
    third = max(1, len(after) // 3)
    first, last = statistics.median(after[:third]), statistics.median(after[-third:])
    growth = (last - first) / first if first else 0.0
    return {"ok": growth <= limit, "first_third_median": first, "last_third_median": last,
            "growth": round(growth, 4), "limit": limit,
            "detail": f"{first / 1024:.1f} -> {last / 1024:.1f} MiB ({growth * 100:+.1f} %, limit {limit * 100:.0f} %)"}


def fd_flat_check(samples, warmup_s):
    after = [r["fds"] for r in samples if r["phase"] == "run" and r["t"] >= warmup_s]
    if len(after) < 3:
        return {"ok": True, "detail": f"n/a: {len(after)} samples after the warm-up (need 3)"}
    third = max(1, len(after) // 3)
    first, last = statistics.median(after[:third]), statistics.median(after[-third:])
    return {"ok": last <= first * 1.2 + 4, "first_third_median": first, "last_third_median": last,
            "detail": f"{first:.0f} -> {last:.0f} open fds under load (limit +20 % +4)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="folder with joader, joader_test_client, make_images")
    ap.add_argument("--duration", type=float, default=600, help="seconds of churn (default 600)")
    ap.add_argument("--jobs", type=int, default=32, help="concurrent jobs to keep alive")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--cache-size", default="64MiB")
    ap.add_argument("--policy", default="refcnt", help="the daemon's cache policy (joader serve --policy)")
    ap.add_argument("--threads", type=int, default=2, help="daemon loader threads")
    ap.add_argument("--sample-s", type=float, default=10)
    ap.add_argument("--warmup-s", type=float, default=None, help="default: min(60, duration / 5)")
    ap.add_argument("--kill-rate", type=float, default=0.25, help="SIGKILLs per second")
    ap.add_argument("--leave-rate", type=float, default=0.2, help="SIGTERM/SIGINTs per second")
    ap.add_argument("--stop-rate", type=float, default=0.05, help="SIGSTOP (1-8 s) per second")
    ap.add_argument("--resume-prob", type=float, default=0.5, help="share of killed jobs restarted with resume")
    ap.add_argument("--verify-frac", type=float, default=0.1, help="share of jobs that check bytes")
    ap.add_argument("--join-delay-s", type=float, default=1.0, help="mean delay before a free slot is filled")
    ap.add_argument("--max-job-s", type=float, default=40, help="target length of one job at its own speed")
    ap.add_argument("--hang-s", type=float, default=60, help="a job without a batch this long is a failure")
    ap.add_argument("--drain-s", type=float, default=180)
    ap.add_argument("--rss-growth", type=float, default=0.20)
    ap.add_argument("--fd-slack", type=int, default=0, help="extra fds allowed at the end")
    ap.add_argument("--daemon-prefix", default="",
                    help="a command to run the daemon under, e.g. 'valgrind --tool=massif --massif-out-file=F'")
    ap.add_argument("--out", help="write the summary and time series as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (kept anyway on failure)")
    args = ap.parse_args()
    if args.warmup_s is None:
        args.warmup_s = min(60.0, args.duration / 5)
    for exe in ("joader", "joader_test_client", "make_images"):
        if not os.access(os.path.join(args.build, exe), os.X_OK):
            sys.exit(f"error: {os.path.join(args.build, exe)} not found (make build, or --build DIR)")

    workdir = tempfile.mkdtemp(prefix="joader-soak-")
    os.chmod(workdir, 0o700)
    os.mkdir(os.path.join(workdir, "jobs"))
    daemon = soak = None
    checks = {}
    baseline = {}
    try:
        datasets = make_datasets(args.build, workdir)
        daemon = Daemon(args.build, workdir, args.cache_size, args.threads, shlex.split(args.daemon_prefix), args.policy)
        baseline["no_datasets"] = daemon.proc_stats()
        for d in datasets:
            daemon.cli("dataset", "add", d["name"], "--source", d["source"], *d["prep"])
        soak = Soak(args, daemon, datasets, workdir)
        # Priming: one short job per dataset, so that lazily created gRPC/loader resources exist
        # before the idle baseline is taken.
        for d in datasets:
            job = Job(None, {"dataset": d["name"], "source": d["source"], "prep": d["prep"], "ids": list(range(64)),
                             "ids_arg": "0:64", "batch": 8, "epochs": 1, "prefetch": 2, "drop_last": False,
                             "verify": True, "delay_ms": 0.0, "jitter_ms": 0.0})
            soak.spawn(job)
            job.proc.wait(timeout=60)
            del soak.running[job.id]
            soak.finish(job)
        time.sleep(1.5)
        baseline["idle"] = daemon.proc_stats()
        print(f"daemon pid {daemon.proc.pid}: idle baseline rss {baseline['idle']['VmRSS'] / 1024:.1f} MiB, "
              f"fds {baseline['idle']['fds']} ({baseline['no_datasets']['fds']} before the datasets), "
              f"threads {baseline['idle']['Threads']}; {args.jobs} jobs for {args.duration:.0f} s, seed {args.seed}",
              flush=True)

        run_cpu0 = daemon.proc_stats()["cpu_s"]
        soak.run()
        run_samples = [r for r in soak.samples if r["phase"] == "run"]
        run_cpu = (run_samples[-1]["cpu_s"] - run_cpu0) / run_samples[-1]["t"] if len(run_samples) > 1 else 0.0

        # End-state checks.
        if daemon.proc.poll() is None:
            deadline = time.monotonic() + 10
            while True:
                s = daemon.status()
                if (not s["jobs"] and s["pinned_bytes"] == 0) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            checks["jobs_gone"] = {"ok": not s["jobs"], "detail": f"{len(s['jobs'])} jobs left: "
                                   + ", ".join(f"{j['name']} ({j['dataset']}, queued {j['queued']})" for j in s["jobs"][:5])}
            checks["pinned_zero"] = {"ok": s["pinned_bytes"] == 0, "detail": f"pinned_bytes {s['pinned_bytes']}"}
            time.sleep(1.0)
            end_idle = daemon.proc_stats()
            checks["fds_back_to_baseline"] = {
                "ok": end_idle["fds"] <= baseline["idle"]["fds"] + args.fd_slack,
                "detail": f"{baseline['idle']['fds']} idle at the start, {end_idle['fds']} idle at the end"}
            final_status = s
            for d in datasets:
                daemon.cli("dataset", "rm", d["name"])
            s = daemon.status()
            time.sleep(0.5)
            after_rm = daemon.proc_stats()
            checks["cache_zero_after_rm"] = {"ok": s["cache_bytes"] == 0 and s["pinned_bytes"] == 0 and not s["datasets"],
                                             "detail": f"cache_bytes {s['cache_bytes']}, pinned_bytes {s['pinned_bytes']}, "
                                                       f"{len(s['datasets'])} datasets after removing all"}
            checks["fds_after_rm"] = {
                "ok": after_rm["fds"] <= baseline["no_datasets"]["fds"] + args.fd_slack,
                "detail": f"{baseline['no_datasets']['fds']} before adding the datasets, {after_rm['fds']} after removing them"}
            rc, secs = daemon.stop_timed()
            checks["daemon_clean_exit"] = {"ok": rc == 0, "detail": f"SIGTERM: exit status {rc} after {secs:.1f} s"}
        else:
            final_status, end_idle, after_rm = None, None, None
            checks["daemon_alive"] = {"ok": False, "detail": f"died with status {daemon.proc.returncode}"}

        checks["rss_flat"] = growth_check(soak.samples, "rss_kib", args.warmup_s, args.rss_growth)
        checks["rss_anon_flat"] = growth_check(soak.samples, "rss_anon_kib", args.warmup_s, args.rss_growth)
        checks["fds_flat"] = fd_flat_check(soak.samples, args.warmup_s)
        c = soak.counts
        checks["epochs_exact"] = {"ok": c["epochs_exact"] == c["epochs_completed"] and c["epochs_completed"] > 0,
                                  "detail": f"{c['epochs_exact']} of {c['epochs_completed']} completed epochs exact"}
        checks["no_failures"] = {"ok": not soak.failures, "detail": f"{len(soak.failures)} failures"}
        verdict = all(ch["ok"] for ch in checks.values())

        print("\n== soak summary ==")
        print(f"{args.duration:.0f} s of churn + {soak.drain_s or 0:.0f} s drain, seed {args.seed}; jobs started {c['started']} (resumed {c['resumed']}): "
              f"completed {c['completed']} (verified bytes {c['verified']}), SIGKILLed {c['killed']}, "
              f"left (SIGTERM/SIGINT) {c['left']}, SIGSTOPped {c['stopped']}")
        print(f"epochs completed {c['epochs_completed']}, exact {c['epochs_exact']}; items printed by clients "
              f"{c['items_printed']}; distinct (dataset, id) hashed {len(soak.hashes)}")
        if final_status:
            ld = final_status["loads"] / final_status["deliveries"] if final_status["deliveries"] else 0
            print(f"daemon: {run_cpu * 100:.0f} % of a core during the churn; loads {final_status['loads']}, deliveries {final_status['deliveries']} (L/D {ld:.3f}), "
                  f"hits {final_status['hits']}, evictions {final_status['evictions']}")
        if end_idle:
            print(f"idle daemon, start -> end: rss {baseline['idle']['VmRSS'] / 1024:.1f} -> {end_idle['VmRSS'] / 1024:.1f} MiB "
                  f"(anon {baseline['idle']['RssAnon'] / 1024:.1f} -> {end_idle['RssAnon'] / 1024:.1f}), "
                  f"threads {baseline['idle']['Threads']} -> {end_idle['Threads']}, fds {baseline['idle']['fds']} -> "
                  f"{end_idle['fds']}; peak rss (VmHWM) {end_idle['VmHWM'] / 1024:.1f} MiB")
        for name, ch in checks.items():
            print(f"  {'ok  ' if ch['ok'] else 'FAIL'} {name}: {ch['detail']}")
        for f in soak.failures[:30]:
            print("  - " + f)
        if len(soak.failures) > 30:
            print(f"  ... and {len(soak.failures) - 30} more")
        print("verdict: " + ("PASS" if verdict else "FAIL"))
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"config": {k: v for k, v in vars(args).items()},
                           "datasets": [{k: d[k] for k in ("name", "source", "prep", "items")} for d in datasets],
                           "baseline": baseline, "end_idle": end_idle, "after_rm": after_rm,
                           "drain_s": soak.drain_s, "daemon_cpu_cores_during_churn": round(run_cpu, 3), "counts": c, "checks": checks, "failures": soak.failures,
                           "verdict": "PASS" if verdict else "FAIL", "samples": soak.samples}, f, indent=1)
                f.write("\n")
        return 0 if verdict else 1
    finally:
        if soak:
            for job in soak.running.values():
                if job.proc.poll() is None:
                    job.proc.kill()
                    job.proc.wait()
        if daemon:
            daemon.stop_timed()
        if args.keep:
            print(f"work folder kept: {workdir} (joader.log, jobs/ID.out|err|cmd of failed jobs)", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
