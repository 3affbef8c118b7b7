"""Fixtures for the Python package tests: a real daemon, the package from build/python."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

BUILD = os.environ.get("JOADER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
JOADER = os.path.join(BUILD, "joader")
MAKE_IMAGES = os.path.join(BUILD, "make_images")


class Daemon:
    def __init__(self, workdir, cache_size="64MiB"):
        self.socket = os.path.join(workdir, "joader.sock")
        self.log_path = os.path.join(workdir, "daemon.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([JOADER, "serve", "--socket", self.socket, "--cache-size", cache_size,
                                          "--threads", "2"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while "serving on" not in open(self.log_path).read():
            assert self.proc.poll() is None and time.time() < deadline, open(self.log_path).read()
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="joader-py-") as d:
        os.chmod(d, 0o700)
        yield d


@pytest.fixture
def daemon(workdir):
    d = Daemon(workdir)
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    import joader
    return joader.Client(daemon.socket)


def make_images(directory, classes=3, per_class=10, size="48x40", learnable=False):
    args = [MAKE_IMAGES, directory, "--classes", str(classes), "--per-class", str(per_class), "--size", size]
    if learnable:
        args.append("--learnable")
    subprocess.run(args, check=True)
