"""The suites' time limit per test (tests/watchdog.py): a hang is an error that names the test and
shows where it and the processes it started were waiting."""
import os
import signal
import subprocess
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "3600.25"  # the stuck test's child: `sleep 3600.25`, found and killed afterwards


def kill_marked_sleeps():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[:2] == [b"sleep", MARK.encode()]:
                        os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def test_a_test_that_runs_past_the_limit_is_named_with_its_stacks_and_the_run_fails(tmp_path):
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {TESTS!r})\nfrom watchdog import time_limit  # noqa: F401\n")
    (tmp_path / "test_stuck.py").write_text(
        "import subprocess, time\n\n\ndef test_passes():\n    pass\n\n\n"
        f"def test_waits_for_ever():\n    subprocess.Popen(['sleep', '{MARK}'])\n    time.sleep(3600)\n")
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                           env={**os.environ, "JOADER_TEST_LIMIT": "3"}, capture_output=True, text=True, timeout=600)
    finally:
        kill_marked_sleeps()
    assert r.returncode == 3, r.stdout + r.stderr
    assert "test_stuck.py::test_waits_for_ever ran past 3 s" in r.stderr, r.stderr
    assert "in test_waits_for_ever" in r.stderr, "the test's Python stack"
    assert f"sleep {MARK}" in r.stderr, "the processes it started"
