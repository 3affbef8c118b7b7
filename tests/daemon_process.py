"""A real `joader serve` on a private socket, shared by the integration and the Python tests."""
import contextlib
import os
import signal
import subprocess
import tempfile
import time


class DaemonProcess:
    def __init__(self, joader, workdir, cache_size="64MiB", threads=2, extra=(), prefix=()):
        """prefix: a command the daemon runs under (e.g. setpriv with fewer capabilities)."""
        self.joader = joader
        self.socket = os.path.join(workdir, "joader.sock")
        self.log = open(os.path.join(workdir, "daemon.log"), "w+")
        self.proc = subprocess.Popen(
            [*prefix, joader, "serve", "--socket", self.socket, "--cache-size", cache_size, "--threads", str(threads), *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while "serving on" not in self.output():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("daemon did not start:\n" + self.output())
            time.sleep(0.02)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=signal.SIGTERM):
        """Sends `sig` (SIGTERM: a clean stop) and waits; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@contextlib.contextmanager
def private_tempdir(prefix):
    """A temporary directory of mode 0700, as the daemon requires for its socket."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        os.chmod(d, 0o700)
        yield d
