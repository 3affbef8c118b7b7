"""joader.Client: talks to the daemon (datasets, status) and opens jobs."""
import ctypes
import hashlib
import numbers
import os
import time

from . import _native, autostart

INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ABORTED, UNAVAILABLE = 3, 5, 9, 10, 14  # gRPC status codes, as the daemon's errors carry them


def error(code, message):
    """A joader.JoaderError with a gRPC status code, as the daemon's own errors are raised."""
    e = _native.JoaderError(message)
    e.code = code
    return e


_started = False  # whether this interpreter has started gRPC (made a Client)
_unusable = None  # why Joader cannot be used in this process (see _after_fork_in_child), or None
_fork_obstacle = None  # why the fork under way cannot carry gRPC (set before it, read after it)


def _before_fork():
    global _fork_obstacle
    _fork_obstacle = _native.fork_prepare() if _started and _unusable is None else None


def _after_fork_in_parent():
    if _started and _unusable is None and not _fork_obstacle:
        _native.fork_parent()


def _after_fork_in_child():
    """The child never uses its parent's connections to a daemon (they are replaced by unconnected
    sockets). gRPC restarted for this process: Clients it inherited reconnect at their next call,
    new ones work. A fork that could not carry gRPC (a job open in the parent, another thread in a
    Joader call, the user's GRPC_* variables) leaves the process unable to use Joader: every call
    raises, none hangs."""
    global _unusable
    if not _started:
        return
    carried = _unusable is None and not _fork_obstacle
    _native.fork_child(carried)
    if not carried and _unusable is None:
        _unusable = (f"this process was forked from process {os.getppid()} while {_fork_obstacle}: gRPC's state "
                     "did not survive that fork, so Joader cannot be used here (its calls would hang). Use Joader "
                     "in a forked process only if it was forked while no Joader job was open and no other thread "
                     "was in a Joader call, or start it with the 'spawn' start method "
                     "(torch.utils.data.DataLoader(multiprocessing_context='spawn'), "
                     "multiprocessing.get_context('spawn'))")


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


def keep_forever(native):
    """Never destroys a native object (a client, a job) inherited through fork(), also not at
    interpreter exit: its destructor would act on the parent's connection (the socket is shared)."""
    if native is not None:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(native))


def check_usable():
    """Raises JoaderError (code 9) in a process forked at a moment gRPC could not survive."""
    if _unusable is not None:
        raise error(FAILED_PRECONDITION, _unusable)


def integer(name, value, minimum=None, maximum=None):
    """value as an int, refusing floats (2.5, and 2.0 too), bools and other types, and values out
    of [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def dataset_name(source, resize=None, crop=None, raw=False, on_error="fail"):
    """A dataset name derived from the source (its path made absolute here) and the prep, stable
    across processes and runs: e.g. "train-3f2a9c1e" for imagefolder:/data/train. Two jobs that
    derive it from the same folder and prep name the same dataset, and so share its loads."""
    kind, sep, arg = str(source).partition(":")
    if sep and kind in ("imagefolder", "lmdb", "filelist", "tar") and arg:
        arg = os.path.abspath(os.path.expanduser(arg))
    spec = f"{kind}{sep}{arg}|raw={bool(raw)}|resize={resize}|crop={crop}|on_error={on_error}"
    base = os.path.basename(arg.rstrip("/")) if sep else kind
    base = "".join(c if c.isalnum() or c in "-_." else "-" for c in base)[:64] or kind
    return f"{base}-{hashlib.sha256(spec.encode()).hexdigest()[:8]}"


class Client:
    """A connection to a Joader daemon.

    socket: the daemon's Unix socket; default $JOADER_SOCKET, else $XDG_RUNTIME_DIR/joader.sock,
    else /tmp/joader-$UID/joader.sock. Raises JoaderError (code 14) if no daemon listens there,
    unless start=True: then a daemon is started on it (joader.autostart; the loaders do this).
    """

    def __init__(self, socket=None, start=False):
        global _started
        check_usable()
        _started = True
        self.start = bool(start)
        try:
            self._handle = _native.Client(socket or "")
        except _native.JoaderError as e:
            if not (start and getattr(e, "code", None) == UNAVAILABLE and autostart.enabled()):
                raise
            path = autostart.socket_path(socket)

            def serving():
                try:
                    _native.Client(path)
                    return True
                except _native.JoaderError as e:
                    if getattr(e, "code", None) != UNAVAILABLE:
                        raise
                    return False

            try:
                autostart.start(path, serving)
            except (RuntimeError, OSError) as failure:
                raise error(UNAVAILABLE, f"no Joader daemon at {path}, and one could not be started: "
                                         f"{failure}") from None
            self._handle = _native.Client(path)
        self._pid = os.getpid()

    @property
    def _native(self):
        check_usable()
        if self._pid != os.getpid():  # inherited through fork(): the parent's connection is left alone
            keep_forever(self._handle)
            self._handle, self._pid = _native.Client(self._handle.socket), os.getpid()
        return self._handle

    def __del__(self):
        if self.__dict__.get("_pid") != os.getpid():
            keep_forever(self.__dict__.get("_handle"))

    @property
    def socket(self):
        return self._native.socket

    def _again(self, call):
        """call(native client), made again when a client that starts its daemon (start=True: the
        loaders') lost it mid-call: the daemon is started again, or waited for, for up to 60 s, as a
        loader's job reconnects. Only for calls that may be repeated (a lookup, an identical
        add_dataset)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return call(self._native)
            except _native.JoaderError as e:
                if not self.start or getattr(e, "code", None) != UNAVAILABLE or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
            try:
                self._handle, self._pid = Client(self._handle.socket, start=True)._handle, os.getpid()
            except _native.JoaderError as e:
                if getattr(e, "code", None) != UNAVAILABLE or time.monotonic() > deadline:
                    raise

    def add_dataset(self, name=None, source=None, resize=None, crop=None, raw=False, on_error="fail"):
        """Registers a dataset (a no-op if an identical one exists); returns its description, whose
        "name" is the dataset's name.

        name: None derives one from the source's absolute path and the prep (dataset_name()), the
        same in every process, so that jobs started apart on one folder share one dataset.
        source: "imagefolder:PATH", "lmdb:PATH", "filelist:FILE", "tar:GLOB" or "synthetic:COUNT[:WxH]".
        Images are decoded once for every job: with crop=C (and an optional resize=S, shorter side
        first) they are stored as C×C center crops (an evaluation pipeline); without crop, at their
        own size (or resized: shorter side S), for jobs that augment per item (augment= of Loader
        and DataLoader). raw=True passes the stored bytes through.
        """
        if source is None:
            raise TypeError("add_dataset() needs a source, e.g. source='imagefolder:/data/train'")
        if name is None:
            name = dataset_name(source, resize=resize, crop=crop, raw=raw, on_error=on_error)
        if raw and (crop is not None or resize is not None):
            raise ValueError("raw=True passes the stored bytes through: it takes no resize or crop")
        resize = 0 if resize is None else integer("resize", resize, 1, 8192)
        crop = 0 if crop is None else integer("crop", crop, 1, 8192)
        # A relative path is made absolute in this process's working directory by the native client.
        return self._again(lambda native: native.add_dataset(name, source, bool(raw), resize, crop, on_error))

    def datasets(self):
        return self._again(lambda native: native.list_datasets())

    def remove_dataset(self, name):
        self._native.remove_dataset(name)

    def end_job(self, name):
        """Ends the job `name` (as status() lists it), e.g. a stale notebook loader that holds the
        cache: its reservation is released now, and its loader gets a JoaderError (code 9) saying
        it was ended. JoaderError code 5 when no job has that name."""
        self._native.end_job(name)

    def status(self):
        """The daemon's counters: loads, deliveries, ld_ratio, hits, cache use, datasets, jobs."""
        return self._again(lambda native: native.status())

    def dataset(self, name):
        """The description of dataset `name`; JoaderError (code 5, NOT_FOUND) if there is none."""
        known = self.datasets()
        for d in known:
            if d["name"] == name:
                return d
        names = ", ".join(d["name"] for d in known) or "none; add one with Client.add_dataset"
        raise error(NOT_FOUND, f"unknown dataset '{name}' (known: {names})")

    def _open_job(self, **kwargs):
        return self._native.open_job(**kwargs)
