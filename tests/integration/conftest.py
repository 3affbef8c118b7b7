"""Fixtures for the daemon integration tests: a real `joader serve` on a private socket."""
import os
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from daemon_process import DaemonProcess, private_tempdir  # noqa: E402

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
