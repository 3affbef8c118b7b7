"""Fixtures for the Python package tests: a real daemon, the package from build/python."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from daemon_process import DaemonProcess, private_tempdir  # noqa: E402
from watchdog import time_limit  # noqa: E402,F401  (a time limit per test: tests/watchdog.py)

BUILD = os.environ.get("JOADER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
JOADER = os.path.join(BUILD, "joader")
MAKE_IMAGES = os.path.join(BUILD, "make_images")
# A loader with no daemon fails here, as before, instead of starting one on the user's default
# socket; the tests of starting one (test_drop_in.py) turn it on for their own socket.
os.environ["JOADER_AUTOSTART"] = "0"


def Daemon(workdir, **kwargs):
    return DaemonProcess(JOADER, workdir, **kwargs)


@pytest.fixture
def workdir():
    with private_tempdir("joader-py-") as d:
        yield d


@pytest.fixture
def daemon(workdir):
    d = Daemon(workdir)
    yield d
    if d.proc.poll() is None:
        code = d.stop()
        assert code == 0, f"the daemon exited with {code} on SIGTERM:\n{d.output()[-3000:]}"



@pytest.fixture
def client(daemon):
    import joader
    return joader.Client(daemon.socket)


def make_images(directory, classes=3, per_class=10, size="48x40", learnable=False):
    args = [MAKE_IMAGES, directory, "--classes", str(classes), "--per-class", str(per_class), "--size", size]
    if learnable:
        args.append("--learnable")
    subprocess.run(args, check=True)


DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def photo_imagefolder(root, count, smallest, largest, save=None):
    """An ImageFolder under root/folder of `count` real photos of several kinds and sizes
    (tests/data/make_photos.py, longer side smallest..largest), alternating between two classes;
    save(path, n, target_dir) may store photo n otherwise (e.g. resized) instead of moving it.
    Returns the folder's path."""
    subprocess.run([sys.executable, os.path.join(DATA, "make_photos.py"), str(root / "made"), "--count", str(count),
                    "--min", str(smallest), "--max", str(largest)], check=True, capture_output=True)
    for n, p in enumerate(sorted(p for p in (root / "made").rglob("*.*") if p.is_file())):
        target = root / "folder" / f"class{n % 2}"
        target.mkdir(parents=True, exist_ok=True)
        if save is None:
            os.replace(p, target / f"{n:02d}{p.suffix}")
        else:
            save(p, n, target)
    return str(root / "folder")

