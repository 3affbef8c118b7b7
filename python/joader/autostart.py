"""The daemon a loader starts by itself when none serves its socket (docs/PYTHON.md, "No daemon to
start").

A loader (joader.torch.DataLoader, joader.Loader) that finds nothing listening at its socket
($JOADER_SOCKET, else the per-user default) runs `joader serve --socket SOCKET --idle-exit N`,
detached from the job (its own session: it outlives the process that started it and serves the
next jobs), its log beside the socket (joader.sock -> joader.log). Processes that start at the same
moment start exactly one daemon: the start is made under an exclusive lock on a file beside the
socket, and whoever takes the lock first looks again. The daemon exits after N seconds without a
job ($JOADER_IDLE_EXIT, default 600; 0: never); `joader stop` stops it at once.

Environment: JOADER_AUTOSTART=0 turns this off (a loader then fails as before when no daemon
serves), JOADER_IDLE_EXIT, JOADER_CACHE_SIZE (the started daemon's --cache-size), JOADER_DISK_CACHE
and JOADER_DISK_CACHE_SIZE (its --disk-cache and --disk-cache-size: prepared items kept on local
disk across runs), JOADER_BIN (the executable to start; default: the one that belongs to this
package).
"""
import fcntl
import os
import re
import subprocess
import sys
import threading
import time

from . import _native

DEFAULT_IDLE_EXIT = 600
START_TIMEOUT = 60  # seconds for a started daemon to serve (it indexes nothing at start)


def enabled():
    return os.environ.get("JOADER_AUTOSTART", "1").strip().lower() not in ("0", "false", "no", "off")


def socket_path(socket=None):
    return socket or _native.default_socket_path()


def _beside(socket, suffix):
    stem = socket[:-5] if socket.endswith(".sock") else socket
    return stem + suffix


def log_path(socket):
    """The log of the daemon started for `socket` (joader.sock -> joader.log)."""
    return _beside(socket, ".log")


def _binary():
    path = os.environ.get("JOADER_BIN")
    if path:
        return os.path.abspath(path)
    from ._cli import binary
    return binary()


def _tail(path, lines=12):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError as e:
        return f"(its log {path} cannot be read: {e.strerror})"


def _open_private(path, flags):
    """Opens a file of ours beside the socket: created 0600, never through a symbolic link."""
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def start(socket, serving):
    """Starts a daemon on `socket` unless one serves it by the time this process holds the start
    lock; `serving()` says whether one does. Returns the started daemon's pid, or None when another
    process's daemon serves. Raises RuntimeError with the last lines of the daemon's log when it
    cannot start."""
    folder = os.path.dirname(socket) or "."
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=0o700, exist_ok=True)
    lock = _open_private(_beside(socket, ".start.lock"), os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent starter holds it at most START_TIMEOUT s
        if serving():
            return None
        log = log_path(socket)
        out = _open_private(log, os.O_WRONLY | os.O_APPEND)
        try:
            offset = os.lseek(out, 0, os.SEEK_END)
            idle = os.environ.get("JOADER_IDLE_EXIT", str(DEFAULT_IDLE_EXIT))
            args = [_binary(), "serve", "--socket", socket, "--idle-exit", idle]
            if os.environ.get("JOADER_CACHE_SIZE"):
                args += ["--cache-size", os.environ["JOADER_CACHE_SIZE"]]
            if os.environ.get("JOADER_DISK_CACHE"):  # absolute: the daemon runs in /
                args += ["--disk-cache", os.path.abspath(os.environ["JOADER_DISK_CACHE"])]
                if os.environ.get("JOADER_DISK_CACHE_SIZE"):
                    args += ["--disk-cache-size", os.environ["JOADER_DISK_CACHE_SIZE"]]
            try:
                proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True,
                                        start_new_session=True, cwd="/")
            except OSError as e:
                raise RuntimeError(f"cannot start the Joader daemon ({args[0]}): {e.strerror}") from e
        finally:
            os.close(out)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with open(log, errors="replace") as f:
                f.seek(offset)
                started = f.read()
            found = re.search(r"serving on .* \(cache ([^,]+),", started)
            if found and serving():
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                raise RuntimeError(f"the Joader daemon started on {socket} did not come up (exit status "
                                   f"{proc.returncode}); the end of its log {log}:\n{_tail(log)}")
            time.sleep(0.02)
        # The daemon is detached (a session of its own) and outlives this process, but while this
        # process lives it is its parent: a thread waits for it, so that a daemon that exits first
        # (--idle-exit, joader stop) is reaped at once instead of staying a zombie until then.
        threading.Thread(target=proc.wait, name="joader-daemon-reaper", daemon=True).start()
        print(f"joader: started a daemon (pid {proc.pid}, cache {found.group(1)}, log {log}; it exits after "
              f"{idle} s without a job, or with `joader stop`)", file=sys.stderr, flush=True)
        return proc.pid
    finally:
        os.close(lock)
