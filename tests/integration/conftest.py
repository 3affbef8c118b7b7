"""Fixtures for the daemon integration tests: a real `joader serve` on a private socket."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from daemon_process import DaemonProcess, private_tempdir  # noqa: E402
from watchdog import time_limit  # noqa: E402,F401  (a time limit per test: tests/watchdog.py)

JOADER = os.environ.get("JOADER_BIN", "build/joader")
CLIENT = os.environ.get("JOADER_TEST_CLIENT", "build/joader_test_client")
MAKE_IMAGES = os.environ.get("JOADER_MAKE_IMAGES", "build/make_images")


class Daemon(DaemonProcess):
    def __init__(self, workdir, **kwargs):
        super().__init__(JOADER, workdir, **kwargs)

    def client(self, dataset, *args):
        """Starts a test client process; returns the Popen."""
        return subprocess.Popen([CLIENT, "--socket", self.socket, "--dataset", dataset, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class StatusWatch:
    """`joader status --json --watch` followed in a thread: the daemon's state sampled every
    `interval` seconds by one long-lived client, each snapshot stamped with time.monotonic() when
    it arrived (no process start per sample, so a bound on the daemon is not a bound on spawning)."""

    def __init__(self, daemon, interval=0.02):
        self._proc = subprocess.Popen([JOADER, "status", "--json", "--watch", str(interval), "--socket", daemon.socket],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._cond = threading.Condition()
        self._snapshots = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self._proc.stdout:
            with self._cond:
                self._snapshots.append((time.monotonic(), json.loads(line)))
                self._cond.notify_all()

    def wait_for(self, predicate, since, timeout=30):
        """The arrival time of the first snapshot taken after `since` (monotonic) that satisfies
        `predicate`, and the snapshot; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for at, snapshot in self._snapshots:
                    if at > since and predicate(snapshot):
                        return at, snapshot
                left = deadline - time.monotonic()
                assert left > 0 and self._proc.poll() is None, f"no such snapshot in {timeout} s: {self._proc.stderr.read()}"
                self._cond.wait(min(left, 0.1))

    def close(self):
        self._proc.terminate()
        self._proc.wait()


@pytest.fixture
def workdir():
    with private_tempdir("joader-test-") as d:
        yield d


@pytest.fixture
def daemon_factory(workdir):
    daemons = []

    def make(**kwargs):
        d = Daemon(workdir, **kwargs)
        daemons.append(d)
        return d

    yield make
    # A daemon still running at the end is stopped as a user would (SIGTERM) and must exit 0: under
    # the sanitizer builds that is also when LeakSanitizer checks it. Daemons a test killed on
    # purpose are already gone.
    failures = []
    for d in daemons:
        if d.proc.poll() is None:
            code = d.stop(signal.SIGTERM)
            if code != 0:
                failures.append(f"{d.socket}: exit status {code}\n{d.output()[-3000:]}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def daemon(daemon_factory):
    return daemon_factory()


def error_time(stderr):
    """The CLOCK_MONOTONIC time at which a test client saw its error ("at T" on stderr)."""
    return float([line for line in stderr.splitlines() if line.startswith("at ")][-1].split()[1])


def received(proc, timeout=60):
    """Waits for a test client; returns (exit code, {epoch: [ids]}, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    epochs = {}
    for line in out.splitlines():
        epoch, item, _label, _checksum = line.split()
        epochs.setdefault(int(epoch), []).append(int(item))
    return proc.returncode, epochs, err


def make_images(directory, classes=3, per_class=10, bad=""):
    args = [MAKE_IMAGES, directory, "--classes", str(classes), "--per-class", str(per_class)]
    if bad:
        args += ["--bad", bad]
    subprocess.run(args, check=True)
