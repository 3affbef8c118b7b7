"""A time limit per test for the pytest suites (both conftests import `time_limit`).

A test that runs past JOADER_TEST_LIMIT seconds (default 480) is named, the stacks of the test
process (every Python thread; every native thread too, with gdb where it is installed) and of each
process it started (gdb, else its kernel wait channel) are printed, and the process exits with
status 3. A hang is then an error that names the test and shows where everything waited, instead
of CTest's timeout at some percentage of the suite. Native stacks of other processes need the
right to trace them (root, as in CI, or kernel.yama.ptrace_scope=0); without it gdb says so. Should
the timer's thread never run (native code holding the GIL), faulthandler's own timer dumps the
Python stacks and exits 120 s later. Daemons the stuck test started are left to their idle exit or
`joader stop`.
"""
import faulthandler
import os
import shutil
import subprocess
import sys
import threading

import pytest

LIMIT = float(os.environ.get("JOADER_TEST_LIMIT", "480"))


def _descendants(pid):
    """The pids of every living process started, directly or not, by pid."""
    parent_of = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent_of[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        children = [c for c, pp in parent_of.items() if pp == p]
        found += children
        frontier += children
    return found


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError as e:
        return f"({e.strerror})"


def _native_stacks(pid, out):
    gdb = shutil.which("gdb")
    if gdb is None:
        print(f"    wchan {_read(f'/proc/{pid}/wchan')} (install gdb for stacks)", file=out, flush=True)
        return
    try:
        subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"], stdout=out,
                       stderr=subprocess.STDOUT, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"    gdb failed: {e}", file=out, flush=True)


def _expire(nodeid, capture):
    # pytest captures the test's output in a file that is lost at exit: give the terminal back.
    if capture is not None:
        try:
            capture.suspend_global_capture(in_=True)
        except Exception:  # noqa: BLE001 (whatever state the capture is in, the stacks matter more)
            pass
    out = sys.__stderr__
    print(f"\n\njoader test watchdog: {nodeid} ran past {LIMIT:g} s (JOADER_TEST_LIMIT); its stacks follow, "
          "then the test run exits with status 3", file=out, flush=True)
    faulthandler.dump_traceback(file=out, all_threads=True)
    print(f"--- the test process {os.getpid()}, native threads:", file=out, flush=True)
    _native_stacks(os.getpid(), out)
    for pid in _descendants(os.getpid()):
        print(f"--- process {pid} started by the test: {_read(f'/proc/{pid}/cmdline')}", file=out, flush=True)
        _native_stacks(pid, out)
    out.flush()
    os._exit(3)


@pytest.fixture(autouse=True)
def time_limit(request):
    capture = request.config.pluginmanager.getplugin("capturemanager")
    timer = threading.Timer(LIMIT, _expire, args=(request.node.nodeid, capture))
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(LIMIT + 120, exit=True)  # needs no GIL
    yield
    faulthandler.cancel_dump_traceback_later()
    timer.cancel()
