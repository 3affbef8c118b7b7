#!/usr/bin/env python3
"""CPU a daemon uses while it has nothing to do: one dataset and no job, then two jobs whose
consumers have stopped (their queues full). Reads the daemon's utime + stime from /proc over
--seconds per case.

    make build && /usr/bin/python3 bench/idle_cpu.py --build build [--build OTHER_BUILD ...]

Several --build folders are measured one after the other, e.g. before and after a change.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from daemon_process import Daemon, cpu_seconds, private_tempdir  # noqa: E402


def share_of_a_core(pid, seconds):
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100 * (cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def measure(build, seconds):
    with private_tempdir("joader-idle-") as d:
        daemon = Daemon(os.path.join(build, "joader"), d, cache_size="64MiB", threads=2)
        try:
            daemon.cli("dataset", "add", "s", "--source", "synthetic:1000:40x36", "--crop", "32")
            time.sleep(1)
            idle = share_of_a_core(daemon.proc.pid, seconds)
            jobs = [subprocess.Popen([os.path.join(build, "joader_test_client"), "--socket", daemon.socket,
                                      "--dataset", "s", "--batch", "8", "--epochs", "1", "--stop-after", "2"],
                                     stdout=subprocess.DEVNULL) for _ in range(2)]
            time.sleep(2)
            stalled = share_of_a_core(daemon.proc.pid, seconds)
            for j in jobs:
                j.kill()
                j.wait()
        finally:
            daemon.stop()
    return idle, stalled


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", help="a build folder (repeatable; default: build)")
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    print("| build | idle, one dataset, no job | two stalled jobs |")
    print("|---|---:|---:|")
    for build in args.build or ["build"]:
        idle, stalled = measure(os.path.abspath(build), args.seconds)
        print(f"| {build} | {idle:.2f} % of a core | {stalled:.2f} % of a core |", flush=True)


if __name__ == "__main__":
    main()
