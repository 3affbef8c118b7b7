"""torch dataset objects served by Joader: which ones, and how they become a registered dataset.

joader.torch.DataLoader(dataset) accepts, besides a dataset name, the object a torch script builds:
a torchvision ImageFolder, a DatasetFolder (or a subclass such as datasets.ImageNet) that reads its
`samples` with torchvision's default image loader, and torch.utils.data.Subset of these, nested or
not. The daemon then reads exactly the object's samples (path, class), in the object's order: they
are written to a file list (one 'path<TAB>class' line each, under $XDG_CACHE_HOME/joader, named by
a hash of its content) and registered as a dataset of decoded images at their own size, named
from the dataset's root and that hash, so that every job of a sweep, and a restarted daemon, find
the same registration. The object's `transform` is the job's per-item pipeline and its
`target_transform` is applied to its labels, as its __getitem__ would. Anything else is refused
with what is accepted: Joader never serves something other than what the object would give.
"""
import hashlib
import os
import tempfile

from .client import INVALID_ARGUMENT, NOT_FOUND, error


class Served:
    """What a DataLoader needs of a dataset object: the base dataset, its item ids that the object
    covers (None: all of them), the object's transforms."""

    def __init__(self, base, ids, transform, target_transform):
        self.base, self.ids, self.transform, self.target_transform = base, ids, transform, target_transform


def _accepted():
    return ("joader.torch.DataLoader serves a dataset name, a torchvision ImageFolder, a DatasetFolder (or a "
            "subclass) that reads its samples with torchvision's default image loader, and "
            "torch.utils.data.Subset of these")


def unwrap(dataset):
    """(base dataset, its item ids that `dataset` covers in order, or None for all) through nested
    Subsets."""
    from torch.utils.data import Subset
    chain = []
    while isinstance(dataset, Subset):
        chain.append(dataset.indices)
        dataset = dataset.dataset
    ids = None
    for indices in reversed(chain):  # innermost first: each level indexes the one below it
        indices = [int(i) for i in indices]
        ids = indices if ids is None else [ids[i] for i in indices]
    return dataset, ids


def check_servable(base):
    """Raises TypeError (saying what is accepted) unless `base` reads (path, class) samples with
    torchvision's default loader through DatasetFolder's own __getitem__."""
    from torchvision.datasets import DatasetFolder
    from torchvision.datasets.folder import default_loader, pil_loader
    what = type(base).__name__
    if not hasattr(base, "samples") or not hasattr(base, "loader"):
        raise TypeError(f"{_accepted()}; a {what} is none of these (its items come from its own code). Use "
                        "torch.utils.data.DataLoader for it, or give its images to Joader as files "
                        "(docs/PYTHON.md, 'Datasets')")
    if getattr(type(base), "__getitem__", None) is not DatasetFolder.__getitem__:
        raise TypeError(f"{_accepted()}; {what} has its own __getitem__, whose items Joader cannot reproduce. Use "
                        "torch.utils.data.DataLoader for it")
    if base.loader not in (default_loader, pil_loader):
        raise TypeError(f"{_accepted()}; {what} reads its files with {getattr(base.loader, '__name__', base.loader)!r}, "
                        "not torchvision's default loader, and Joader decodes as that loader does. Use "
                        "torch.utils.data.DataLoader for it")


def _list_folder():
    """Where file lists are kept: $XDG_CACHE_HOME/joader (default ~/.cache/joader), else a private
    folder in the temporary directory."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for folder in (os.path.join(cache, "joader", "lists"),
                   os.path.join(tempfile.gettempdir(), f"joader-{os.getuid()}", "lists")):
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise OSError("no writable folder for Joader's file lists (set XDG_CACHE_HOME to one)")


def file_list(samples):
    """The file-list text of `samples` ((path, class) pairs; paths made absolute here)."""
    lines = []
    for n, (path, label) in enumerate(samples):
        path = os.path.abspath(os.fspath(path))
        if "\n" in path or path.endswith("\r"):
            raise ValueError(f"sample {n} of the dataset has a file name that ends a line ({path!r}); Joader's file "
                             "lists cannot hold it: rename the file")
        lines.append(f"{path}\t{int(label)}\n")
    return "".join(lines)


def _write_once(path, text):
    if os.path.exists(path):
        return
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".list-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # a daemon of another user (a shared one) reads it too
        os.replace(tmp, path)  # whole, never half-written; concurrent writers write the same bytes
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def register(client, base):
    """Registers `base` (check_servable) with the daemon, unless it already is; returns its name."""
    text = file_list(base.samples)
    if not text:
        raise ValueError(f"the {type(base).__name__} has no samples")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    root = os.path.basename(os.path.abspath(os.fspath(getattr(base, "root", "") or "dataset")).rstrip("/"))
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in root)[:48] or "dataset"
    name = f"{stem}-{digest}"
    try:
        client.dataset(name)
        return name  # registered by another job of the sweep, or restored by a restarted daemon
    except Exception as e:
        if getattr(e, "code", None) != NOT_FOUND:
            raise
    path = os.path.join(_list_folder(), f"{name}.tsv")
    _write_once(path, text)
    client.add_dataset(name, source=f"filelist:{path}")
    return name


def describe(dataset):
    """A Served for the torch dataset object `dataset` (see the module's docstring); this needs no
    daemon (register(client, served.base) then gives the dataset's name)."""
    base, ids = unwrap(dataset)
    if isinstance(base, str):
        raise TypeError("a Subset of a dataset name: give the name with indices= instead")
    check_servable(base)
    if ids is not None:
        n = len(base.samples)
        bad = [i for i in ids if not -n <= i < n]
        if bad:
            raise error(INVALID_ARGUMENT, f"the Subset's index {bad[0]} is out of range for a dataset of {n} items")
        ids = [i % n for i in ids]
    return Served(base, ids, getattr(base, "transform", None), getattr(base, "target_transform", None))
