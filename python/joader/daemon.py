"""Run a `joader serve` from Python: start it, wait until it serves, talk to it with the CLI, stop it.

    from joader.daemon import Daemon
    with Daemon("build/joader", workdir, cache_size="2GiB") as d:   # socket: workdir/joader.sock
        d.cli("dataset", "add", "train", "--source", "imagefolder:/data/train", "--crop", "224")
        ...                                                         # jobs use d.socket
        print(d.status()["ld_ratio"])

For demos, benchmarks, tests and notebooks. Standard library only, and it does not load the
native module: the sanitizer test builds load this file by path where the package cannot be
imported.
"""
import json
import os
import signal
import subprocess
import time


class Daemon:
    def __init__(self, joader, workdir, *, name="joader", cache_size=None, threads=None, extra=(), prefix=(),
                 timeout=15):
        """Starts JOADER serve on WORKDIR/NAME.sock (log: WORKDIR/NAME.log) and waits until it serves.

        workdir must be private (0700) or sticky; extra: more `serve` arguments; prefix: a command
        to run the daemon under (e.g. setpriv). Raises RuntimeError with the log if it does not start.
        """
        self.joader = joader
        self.socket = os.path.join(workdir, name + ".sock")
        self.log_path = os.path.join(workdir, name + ".log")
        self._log = open(self.log_path, "w+")
        args = [*prefix, joader, "serve", "--socket", self.socket]
        if cache_size is not None:
            args += ["--cache-size", str(cache_size)]
        if threads is not None:
            args += ["--threads", str(threads)]
        self.proc = subprocess.Popen([*args, *extra], stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while "serving on" not in self.output():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError("joader serve did not start:\n" + self.output())
            time.sleep(0.02)

    def output(self):
        """Everything the daemon has logged so far."""
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as f:
            return f.read()

    def cli(self, *args, check=True, timeout=60):
        """Runs `joader ARGS --socket SOCKET`; returns the CompletedProcess (text). With check, a
        non-zero exit raises RuntimeError with the command's stderr."""
        r = subprocess.run([self.joader, *args, "--socket", self.socket], capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"joader {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
        return r

    def status(self):
        """`joader status --json` as a dict."""
        return json.loads(self.cli("status", "--json").stdout)

    def wait_arena_ready(self, timeout):
        """Waits up to `timeout` seconds for the daemon to report its arena ready (`arena_ready`: its
        background thread has mapped and touched every page, docs/DAEMON.md "First touches"); True
        once it is (also from a daemon too old to report it), False after the timeout."""
        deadline = time.monotonic() + timeout
        while not self.status().get("arena_ready", True):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Sends sig (SIGTERM: a clean stop) and waits, killing it after timeout; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
