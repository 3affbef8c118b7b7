"""joader.Client: talks to the daemon (datasets, status) and opens jobs."""
from . import _native


class Client:
    """A connection to a Joader daemon.

    socket: the daemon's Unix socket; default $JOADER_SOCKET, else $XDG_RUNTIME_DIR/joader.sock,
    else /tmp/joader-$UID/joader.sock. Raises JoaderError if no daemon listens there.
    """

    def __init__(self, socket=None):
        self._native = _native.Client(socket or "")

    @property
    def socket(self):
        return self._native.socket

    def add_dataset(self, name, source, resize=None, crop=None, raw=False, on_error="fail"):
        """Registers a dataset (a no-op if an identical one exists); returns its description.

        source: "imagefolder:PATH", "lmdb:PATH", "filelist:FILE" or "synthetic:COUNT[:WxH]".
        Decoded datasets need crop (and optionally resize: shorter side first); raw=True passes
        the stored bytes through.
        """
        if not raw and crop is None:
            raise ValueError("choose crop=C (with an optional resize=S) to decode images, or raw=True")
        return self._native.add_dataset(name, source, bool(raw), int(resize or 0), int(crop or 0), on_error)

    def datasets(self):
        return self._native.list_datasets()

    def remove_dataset(self, name):
        self._native.remove_dataset(name)

    def status(self):
        """The daemon's counters: loads, deliveries, ld_ratio, hits, cache use, datasets, jobs."""
        return self._native.status()

    def dataset(self, name):
        for d in self.datasets():
            if d["name"] == name:
                return d
        raise KeyError(f"unknown dataset '{name}'")

    def _open_job(self, **kwargs):
        return self._native.open_job(**kwargs)
