"""joader.pool: the part of a job's per-item pipeline that Joader does not run natively — a user's
own transform, a third-party one, a torchvision op without a C++ twin — run per item in Python,
in worker processes the job owns (num_workers=; 0 runs it in the job's own process).

Each image arrives as torchvision would hand it over (a PIL image, after the native prefix), goes
through the transforms one by one, and comes back as an array: a PIL image or an HWC array as
uint8 [H, W, C], a tensor as it is ([C, H, W] after ToTensor). Pixels travel through shared
memory (a memfd per buffer, its descriptor passed over the worker's socket), not through pickle;
only an output larger than its buffer is pickled back, and the next buffers are sized for it.

Seeding: before each item, Python's `random`, numpy's global generator and torch's are seeded
from (augment_seed, epoch, item), so a job's draws are reproducible, survive a resume, and do not
depend on which worker ran the item or on the other jobs. A transform that raises ends the batch
with JoaderError (code 15) naming the transform, the item and the original exception; a worker
that dies is an error naming it, never a hang.
"""
import collections
import itertools
import mmap
import multiprocessing
import os
import random
import signal
import sys
import traceback
from multiprocessing.connection import wait
from multiprocessing.reduction import recv_handle, send_handle

import numpy as np

from . import _native
from .augment import derived_seed, describe
from .client import error

DATA_LOSS, INTERNAL = 15, 13
_PYTHON_TAG = 0x7079  # the Python ops' seeds are derived apart from the native ops' draws
_MIB = 1 << 20


def item_seed(seed, epoch, item):
    """The seed of the Python ops for one delivery of `item` in `epoch` to a job seeded `seed`."""
    return derived_seed(seed, _PYTHON_TAG, epoch, item)


def seed_everything(seed):
    """Seeds Python's random, numpy's global generator and torch's (when imported)."""
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


class TransformFailed(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


def _as_array(x):
    """(kind, array) of a pipeline's output: "image" for a PIL image or an array ([H, W, C] uint8),
    "tensor" for a torch tensor (as it is)."""
    if hasattr(x, "getbands"):  # a PIL image
        a = np.asarray(x)
        return "image", a[:, :, None] if a.ndim == 2 else a
    if isinstance(x, np.ndarray):
        return "image", x[:, :, None] if x.ndim == 2 else x
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return "tensor", x.detach().cpu().contiguous().numpy()
    raise TypeError(f"the pipeline gave a {type(x).__module__}.{type(x).__name__}, not a PIL image, a numpy array "
                    "or a torch tensor")


def run_pipeline(transforms, image, seed, epoch, item):
    """(kind, array): `image` (uint8 [H, W, 3]) through the transforms, as a PIL image, after
    seeding for (seed, epoch, item). Raises TransformFailed naming the transform that raised."""
    from PIL import Image
    seed_everything(item_seed(seed, epoch, item))
    x = Image.fromarray(np.ascontiguousarray(image), "RGB")
    for t in transforms:
        try:
            x = t(x)
        except Exception as e:
            lines = traceback.format_exception(type(e), e, e.__traceback__)
            raise TransformFailed(f"augment: {describe(t)} raised {type(e).__name__}: {e} on item {item} of epoch "
                                  f"{epoch}; its batch is not consumed. Traceback (in the worker):\n"
                                  + "".join(lines[-6:]).rstrip()) from None
    try:
        return _as_array(x)
    except TypeError as e:
        raise TransformFailed(f"augment: {e} for item {item} of epoch {epoch}") from None


def _worker_main(conn, transforms, worker_id, worker_init_fn, siblings=()):
    """A worker: runs tasks (chunks of a batch) in order until told to stop (None) or orphaned.
    siblings: the job's ends of the workers forked before this one, which it closes: a copy kept
    here would keep them from seeing the job's process end."""
    for sibling in siblings:
        sibling.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the job's process's to handle
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)  # as torch's DataLoader workers: the job's cores are shared
    if worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception as e:
            conn.send(("error", None, f"worker_init_fn raised {type(e).__name__}: {e} in worker {worker_id}"))
            return
    buffers = {}
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        tid, seed, epoch, items, (bid, size, new), out_offset, forget = task
        for old in forget:
            buffers.pop(old, None)
        if new:
            fd = recv_handle(conn)
            buffers[bid] = mmap.mmap(fd, size)
            os.close(fd)
        buf = buffers[bid]
        results, spilled, pos = [], [], out_offset
        try:
            for item, offset, h, w in items:
                kind, out = run_pipeline(transforms, np.ndarray((h, w, 3), np.uint8, buf, offset), seed, epoch, item)
                if not spilled and pos + out.nbytes <= size:
                    np.ndarray(out.shape, out.dtype, buf, pos)[...] = out
                    results.append((kind, out.shape, out.dtype.str, pos))
                    pos += out.nbytes
                else:
                    results.append((kind, out.shape, out.dtype.str, None))
                    spilled.append(np.ascontiguousarray(out))
            conn.send(("ok", tid, results, spilled))
        except TransformFailed as e:
            conn.send(("error", tid, e.message))


class _Buffer:
    """Shared memory for one worker's task: a memfd mapped here and in the worker."""
    _ids = itertools.count()

    def __init__(self, size):
        self.id, self.size = next(self._ids), size
        self.fd = os.memfd_create("joader-augment", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)
        self.mm = mmap.mmap(self.fd, size)
        self.busy = False

    def close(self):
        try:
            self.mm.close()
        except BufferError:  # a batch still views it: the mapping goes with the last view
            pass
        os.close(self.fd)


class _Worker:
    def __init__(self, context, transforms, worker_id, worker_init_fn, siblings=()):
        self.conn, child = context.Pipe(duplex=True)
        # A forked worker inherits the earlier workers' pipes; one started otherwise gets none.
        siblings = [w.conn for w in siblings] if context.get_start_method() == "fork" else []
        self.proc = context.Process(target=_worker_main, args=(child, transforms, worker_id, worker_init_fn, siblings),
                                    name=f"joader-augment-{worker_id}", daemon=True)
        self.proc.start()
        child.close()
        self.id = worker_id
        self.buffers, self.known, self.forget = [], set(), []

    def buffer(self, size):
        """A free buffer of at least `size` bytes (a new one replaces the smallest free one)."""
        free = [b for b in self.buffers if not b.busy]
        fit = [b for b in free if b.size >= size]
        if fit:
            return min(fit, key=lambda b: b.size)
        if free and len(self.buffers) >= 4:
            old = min(free, key=lambda b: b.size)
            self.buffers.remove(old)
            if old.id in self.known:
                self.known.discard(old.id)
                self.forget.append(old.id)
            old.close()
        b = _Buffer(-(-size // _MIB) * _MIB)
        self.buffers.append(b)
        return b

    def send(self, tid, seed, epoch, items, buf, out_offset):
        new = buf.id not in self.known
        try:
            self.conn.send((tid, seed, epoch, items, (buf.id, buf.size, new), out_offset, self.forget))
            if new:
                send_handle(self.conn, buf.fd, self.proc.pid)
        except OSError:
            raise self._died() from None
        self.forget = []
        if new:
            self.known.add(buf.id)

    def _died(self):
        self.proc.join(1)
        code = self.proc.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with {code}"
        return error(INTERNAL, f"augment: worker process {self.id} (pid {self.proc.pid}) {how} while it ran the "
                               "Python part of the pipeline; its batch is not consumed")

    def receive(self):
        """The worker's next reply; JoaderError if it died first."""
        while True:
            ready = wait([self.conn, self.proc.sentinel])
            if self.conn in ready:
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    pass
            if self.proc.sentinel in ready or not self.proc.is_alive():
                raise self._died()

    def stop(self):
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()
        for b in self.buffers:
            b.close()
        self.buffers = []


Output = collections.namedtuple("Output", "kind shape dtype chunks")  # chunks: arrays [m, *shape], in item order


class Ticket:
    def __init__(self, tid, ids, parts, local=None):
        self.tid, self.ids, self.parts, self.local = tid, ids, parts, local  # parts: [(worker, buffer, m)]


class PythonStage:
    """Runs `transforms` per item, in `num_workers` processes (started on first use with the
    multiprocessing `context`, "fork" as torch's DataLoader on Linux; 0: in this process).
    submit() hands a batch over and returns at once; collect() (in submission order) waits for it.
    After an error or an interruption, reset() ends the workers (new ones start on next use)."""

    def __init__(self, transforms, num_workers=2, worker_init_fn=None, context=None):
        self.transforms = list(transforms)
        self.num_workers = num_workers
        self.worker_init_fn = worker_init_fn
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context or "fork")
        self.context = context
        self.workers = []
        self._tids = itertools.count()
        self._out_per_item = 0  # the largest output of an item so far, bytes

    def _start(self):
        if not self.workers and self.num_workers > 0:
            workers = []
            for i in range(self.num_workers):
                workers.append(_Worker(self.context, self.transforms, i, self.worker_init_fn, workers))
            self.workers = workers

    def submit(self, seed, epoch, ids, images):
        """images: uint8 [n, H, W, 3] or a list of [H, W, 3] arrays, in the order of ids."""
        tid = next(self._tids)
        ids = [int(i) for i in ids]
        if self.num_workers == 0:
            return Ticket(tid, ids, None, [run_local(self.transforms, images[k], seed, epoch, ids[k])
                                           for k in range(len(ids))])
        self._start()
        n = len(ids)
        chunks = min(n, len(self.workers))
        bounds = [n * c // chunks for c in range(chunks + 1)]
        parts = []
        for c in range(chunks):
            a, b = bounds[c], bounds[c + 1]
            worker = self.workers[c]
            sizes = [images[k].nbytes for k in range(a, b)]
            in_bytes = sum(sizes)
            out_offset = -(-in_bytes // 64) * 64
            guess = self._out_per_item or 4 * max(sizes)
            buf = worker.buffer(out_offset + (b - a) * guess)
            buf.busy = True
            items, offset = [], 0
            if isinstance(images, np.ndarray):
                np.ndarray((b - a, *images.shape[1:]), np.uint8, buf.mm, 0)[...] = images[a:b]
            for k, nbytes in zip(range(a, b), sizes):
                h, w = images[k].shape[:2]
                if not isinstance(images, np.ndarray):
                    np.ndarray((h, w, 3), np.uint8, buf.mm, offset)[...] = images[k]
                items.append((ids[k], offset, h, w))
                offset += nbytes
            worker.send(tid, seed, epoch, items, buf, out_offset)
            parts.append((worker, buf, b - a))
        return Ticket(tid, ids, parts)

    def collect(self, ticket):
        """The batch's outputs (Output), all of one kind, shape and dtype; raises JoaderError when a
        transform raised, a worker died, or the outputs differ. Call release(ticket) once the
        chunks are copied out."""
        if ticket.local is not None:
            outs = ticket.local
            self._check_same(ticket.ids, [(k, a.shape, a.dtype.str) for k, a in outs])
            return Output(outs[0][0], outs[0][1].shape, outs[0][1].dtype, [np.stack([a for _, a in outs])])
        described, chunks = [], []
        for worker, buf, m in ticket.parts:
            reply = worker.receive()
            if reply[0] == "error":
                raise error(DATA_LOSS, reply[2])
            _, tid, results, spilled = reply
            if tid != ticket.tid:  # not an assert: python -O would shift every later batch by one
                raise error(INTERNAL, f"augment: worker {worker.id} answered task {tid} where task {ticket.tid} "
                                      "was due; the batch is not consumed")
            described += [(kind, tuple(shape), dtype) for kind, shape, dtype, _ in results]
            chunks.append((buf, results, spilled))
        self._check_same(ticket.ids, described)
        kind, shape, dtype = described[0]
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        self._out_per_item = max(self._out_per_item, nbytes)
        arrays = []
        for buf, results, spilled in chunks:
            if spilled:
                arrays.append(np.stack([np.ndarray(shape, dtype, buf.mm, pos) for *_, pos in results if pos is not None]
                                       + spilled))
            else:
                arrays.append(np.ndarray((len(results), *shape), dtype, buf.mm, results[0][3]))
        return Output(kind, shape, np.dtype(dtype), arrays)

    @staticmethod
    def _check_same(ids, described):
        first = described[0]
        for item, d in zip(ids, described):
            if d[0] != first[0] or tuple(d[1]) != tuple(first[1]) or d[2] != first[2]:
                def text(x):
                    if x[0] == "tensor":
                        return f"a tensor of shape {tuple(x[1])} ({np.dtype(x[2])})"
                    return f"a {x[1][1]}×{x[1][0]} image ({x[1][2]} channels, {np.dtype(x[2])})"
                raise error(DATA_LOSS, f"augment: the pipeline's outputs differ: item {ids[0]} gave {text(first)}, "
                                       f"item {item} {text(d)}; a batch needs one size and type (end the pipeline in "
                                       "a fixed size, e.g. CenterCrop or RandomResizedCrop)")

    def release(self, ticket):
        for _, buf, _ in ticket.parts or ():
            buf.busy = False

    def reset(self):
        """Ends the workers (pending tickets are dropped); new ones start on next submit()."""
        workers, self.workers = self.workers, []
        for w in workers:
            w.stop()

    close = reset


def run_local(transforms, image, seed, epoch, item):
    try:
        return run_pipeline(transforms, image, seed, epoch, item)
    except TransformFailed as e:
        raise error(DATA_LOSS, e.message) from None


def to_batch(out, layout, to_float, threads=1, erase=None, seed=0, epoch=0, ids=()):
    """The batch array of a collected Output: images (uint8 HWC) in `layout` ("NHWC"/"NCHW") and,
    with to_float (() or (mean, std)), float32 with torchvision's ToTensor/Normalize arithmetic,
    then `erase`d (a tail's RandomErasing, drawn from (seed, epoch, item id)); tensors as the
    pipeline made them (stacked)."""
    n = sum(len(c) for c in out.chunks)
    if out.kind == "tensor":
        batch = np.empty((n, *out.shape), out.dtype)
        pos = 0
        for c in out.chunks:
            batch[pos:pos + len(c)] = c
            pos += len(c)
        return batch
    h, w, channels = out.shape
    if out.dtype != np.uint8:
        raise error(DATA_LOSS, f"augment: the pipeline gave {out.dtype} images; images must be uint8 (or end the "
                               "pipeline in a tensor conversion)")
    chw = layout == "NCHW"
    shape = (n, channels, h, w) if chw else (n, h, w, channels)
    batch = np.empty(shape, np.float32 if to_float is not None else np.uint8)
    if erase is not None and channels != 3:
        raise error(DATA_LOSS, f"augment: the pipeline gave {channels}-channel images; its final RandomErasing "
                               "is fused for 3 channels only")
    ids = [int(i) for i in ids]
    pos = 0
    for c in out.chunks:
        dst = batch[pos:pos + len(c)]
        if channels == 3:
            _native.convert_images(c, dst, chw, to_float, threads, erase, seed, epoch, ids[pos:pos + len(c)])
        else:  # the same arithmetic in numpy (float32 throughout, as torch's)
            x = c.transpose(0, 3, 1, 2) if chw else c
            if to_float is None:
                dst[...] = x
            else:
                x = x.astype(np.float32) / np.float32(255)
                if to_float:
                    mean, std = (np.asarray(v, np.float32) for v in to_float)
                    if len(mean) != channels:
                        raise error(DATA_LOSS, f"augment: Normalize has {len(mean)} values, the images "
                                               f"{channels} channels")
                    view = (slice(None), slice(None), None, None) if chw else (None, None, slice(None))
                    x = (x - mean[view]) / std[view]
                dst[...] = x
        pos += len(c)
    return batch
