"""The daemon starter shared by the tests and the soak benchmark: python/joader/daemon.py, loaded
by path, since the sanitizer builds cannot import the joader package (its native module)."""
import contextlib
import importlib.util
import os
import signal
import tempfile
import time

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "joader", "daemon.py")
_spec = importlib.util.spec_from_file_location("joader_daemon", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
Daemon = _module.Daemon


class DaemonProcess(Daemon):
    """A test daemon: a 64 MiB cache and 2 loader threads unless told otherwise."""

    def __init__(self, joader, workdir, cache_size="64MiB", threads=2, **kwargs):
        super().__init__(joader, workdir, cache_size=cache_size, threads=threads, **kwargs)


def stop_process(pid, timeout=10):
    """SIGSTOPs `pid` and returns once every thread of it is stopped. kill() only starts a group
    stop: one thread takes the signal and then stops the others, so under load another thread can
    still answer a request sent right after kill() returns (seen: a status call answered by a
    daemon SIGSTOPped just before, 3 runs in 15 beside two busy loops)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended
                pass
        if all(state in ("T", "t") for state in states):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} not stopped {timeout} s after SIGSTOP: thread states {states}")
        time.sleep(0.005)


def cpu_seconds(pid):
    """User + system CPU seconds of a running process, from /proc/PID/stat (utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def private_tempdir(prefix):
    """A temporary directory of mode 0700, as the daemon requires for its socket."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        os.chmod(d, 0o700)
        yield d
