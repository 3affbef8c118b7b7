"""joader.Loader: one job's batches, epoch after epoch, with mid-epoch resume."""
import collections
import math
import numbers
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from .augment import Plan, fresh_seed, plan as augment_plan
from ._native import JoaderError
from .client import (ABORTED, FAILED_PRECONDITION, INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE, Client, error, integer,
                     keep_forever)
from . import state as job_state
from .pool import PythonStage, to_batch

MAX_ITEMS = 2**32  # item ids are 32-bit in the daemon


@dataclass
class Batch:
    indices: np.ndarray  # int64 [B]: item ids in the dataset
    labels: np.ndarray   # int64 [B]
    data: object         # uint8 [B, H, W, C] (layout="NCHW": [B, C, H, W]) for fixed-size items (a crop,
                         # or augment=), a list of
                         # [H, W, 3] arrays for images stored at their own size, of bytes for raw ones
    epoch: int           # 0-based


def item_ids(indices):
    """(ids, largest): indices as a 1-D array of non-negative integer ids, and the largest of
    them as a Python int (it may exceed 64 bits). Refuses floats (1.5, and 1.0 too), bools, nested and empty sequences."""
    array = np.asarray(indices)
    if array.ndim != 1:
        raise ValueError(f"indices must be a flat sequence of item ids, not an array of shape {array.shape}")
    if len(array) == 0:
        raise ValueError("indices is empty")
    if array.dtype.kind in "iu":
        lo, hi = int(array.min()), int(array.max())
    else:  # floats, bools, or Python ints too large for 64 bits (an object array)
        values = array.tolist()
        bad = next((x for x in values if isinstance(x, bool) or not isinstance(x, numbers.Integral)), None)
        if bad is not None:
            raise TypeError(f"indices must be integer item ids, not {type(bad).__name__} values such as {bad!r}")
        lo, hi = min(values), max(values)
    if lo < 0:
        raise ValueError("indices must be non-negative item ids")
    return array, hi


def subset_ids(client, dataset, indices):
    """indices as an int64 array of item ids (see item_ids); an id beyond the daemon's 32-bit ids
    gets the daemon's own error for an id outside the dataset (JoaderError, INVALID_ARGUMENT)."""
    array, largest = item_ids(indices)
    if largest >= MAX_ITEMS:
        items = client.dataset(dataset)["items"]
        raise error(INVALID_ARGUMENT, f"item id {largest} is outside the dataset ({items} items)")
    return array.astype(np.int64)


def augment_refusal(plan, info, dataset):
    """Why `plan` (joader.augment's) cannot run on the dataset Client.dataset() described as
    `info`, or None: a Python part needs decoded images."""
    if plan.python and info["raw"]:
        return f"augment needs a decoded dataset, and '{dataset}' stores raw bytes"
    return None


def reconnect_seconds(reconnect):
    """reconnect= as seconds to wait for a lost daemon: True 60, False/0 none, or a number."""
    if isinstance(reconnect, bool):
        return 60.0 if reconnect else 0.0
    if not isinstance(reconnect, numbers.Real) or not reconnect >= 0:
        raise ValueError(f"reconnect must be True, False or a number of seconds >= 0, not {reconnect!r}")
    return float(reconnect)


def exhausted(epochs, what):
    """The error of a pass over a loader that has delivered all its epochs (rather than a silent
    empty pass)."""
    return error(FAILED_PRECONDITION,
                 f"this {what} has delivered all its epochs={epochs}: nothing is left to iterate; give epochs=None "
                 "(one epoch per pass, as many passes as the loop makes) or a larger epochs, or pass its "
                 "state_dict() as state= to a new one to continue")


class Loader:
    """An iterable of Batch: every item of the job's subset exactly once per epoch, in a uniformly
    random order, shared with the other jobs on the same dataset.

    dataset: a dataset name known to the daemon. indices: the job's subset (default: every item).
    epochs: how many epochs one pass over the loader yields (None: unbounded); a pass over a loader
    that has yielded them all raises JoaderError. A batch never spans two epochs; the last batch of an epoch may be short unless drop_last. state: a state_dict()
    of an earlier loader of the same job, even from a process that died: the job continues in that
    epoch with exactly the items not consumed yet. augment: a per-item pipeline (a transform, a
    list or a Compose) for a decoded dataset: its longest prefix of RandomResizedCrop,
    RandomHorizontalFlip, Resize and CenterCrop that ends in one size runs in C++ in this process, on
    augment_threads threads; the rest (any callable taking and giving a PIL image) runs per item in
    num_workers worker processes (None: augment_threads of them; 0: in this process; see
    joader.pool), worker_init_fn(worker_id) called in each as it starts. All random draws come from
    (augment_seed, epoch, item): None draws a fresh seed for this job. layout: "NHWC" (the
    daemon's own) or "NCHW", in which fixed-size RGB items are gathered straight into [B, C, H, W]
    (one pass over the bytes; cheaper than gathering NHWC and permuting). reconnect: when the daemon
    is lost (killed, restarted), wait up to 60 s (True), that many seconds (a number) or not at all
    (False) for it to serve again, then continue the job exactly where it was, from its own state:
    nothing consumed is repeated, nothing unconsumed is lost. shuffle=False: each epoch in the
    order of `indices` (of the dataset's items without them), as torch's SequentialSampler; the
    job still shares the daemon's cache with the others, whose orders stay uniformly random.

    The arguments that start with _ are joader.torch.DataLoader's, which makes one Loader per job
    (or per epoch of a data-parallel rank) over its own pool of workers: _stage, that pool;
    _to_float, float32 batches (() for x / 255, (mean, std) to normalise too, converted in the pass
    that writes the batch; None: uint8); _erase, its pipeline's RandomErasing, applied in the same
    pass (augment._tensor_tail); _depth, batches the Python stage works on ahead of the one yielded.
    """

    def __init__(self, dataset, name=None, indices=None, batch_size=1, epochs=1, client=None, state=None,
                 drop_last=False, prefetch=4, augment=None, augment_seed=None, augment_threads=2, layout="NHWC",
                 reconnect=True, num_workers=None, worker_init_fn=None, shuffle=True, _stage=None, _to_float=None,
                 _erase=None, _depth=2):
        self.batch_size = integer("batch_size", batch_size, 1)
        self.shuffle = bool(shuffle)
        self.reconnect = reconnect_seconds(reconnect)
        if layout not in ("NHWC", "NCHW"):
            raise error(INVALID_ARGUMENT, f"layout must be 'NHWC' or 'NCHW', not {layout!r}")
        self.layout = layout
        self.epochs = None if epochs is None else integer("epochs", epochs, 1)
        self.prefetch = integer("prefetch", prefetch, 1)
        self.client = client or Client(start=True)
        self.dataset = dataset
        self.name = name or ""
        self.drop_last = bool(drop_last)
        self.indices = None if indices is None else subset_ids(self.client, dataset, indices)
        info = self.client.dataset(dataset)
        self._identity = job_state.identity(info)
        self._size = len(self.indices) if self.indices is not None else self._identity[job_state.DATASET_ITEMS]
        plan = augment if isinstance(augment, Plan) else augment_plan(augment, tensors=False)
        self._augment = plan.native
        self._augmenting = plan.augmenting
        self.augment_threads = integer("augment_threads", augment_threads, 1)
        # The Python part of the pipeline: a pool of worker processes (joader.torch.DataLoader
        # passes its own, kept across its per-epoch loaders), batches in flight in self._pending.
        self._stage, self._own_stage = _stage, False
        refusal = augment_refusal(plan, info, dataset)
        if refusal:
            raise error(INVALID_ARGUMENT, refusal)
        if plan.python and _stage is None:
            workers = self.augment_threads if num_workers is None else integer("num_workers", num_workers, 0)
            self._stage, self._own_stage = PythonStage(plan.python, workers, worker_init_fn), True
        self._pending = collections.deque()  # (epoch, last, ids, labels, ticket) fetched, not yet yielded
        self._fetched_all = False
        self._depth = _depth
        self._to_float, self._erase = _to_float, _erase
        augment_seed = job_state.augment_seed(augment_seed, state)  # a resumed job gets the crops it would have got
        self.augment_seed = None if not plan.augmenting else (
            fresh_seed() if augment_seed is None else integer("augment_seed", augment_seed, 0, 2**64 - 1))
        self._epoch, self._consumed = 0, []
        if state is not None:
            self._epoch, self._consumed = job_state.position(state, dataset, self._identity, "Loader")
        self._job = None
        self._pid = os.getpid()  # the process whose loader this is (see _check_process)
        self._waited = 0.0  # by jobs of this loader that are closed
        self._skipped = set()

    def __len__(self):
        """Batches per epoch."""
        return self._size // self.batch_size if self.drop_last else math.ceil(self._size / self.batch_size)

    @property
    def items_per_epoch(self):
        """The job's subset size: the items of one epoch (before drop_last drops a short batch)."""
        return self._size

    @property
    def epoch(self):
        """The epoch the next batch belongs to (0-based): after a pass over a whole epoch, the next."""
        return self._epoch

    def _open(self):
        resume = self._epoch > 0 or bool(self._consumed)
        ids = [] if self.indices is None else self.indices.tolist()
        self._job = self.client._open_job(
            dataset=self.dataset, name=self.name, ids=ids, batch_size=self.batch_size,
            epochs=0 if self.epochs is None else int(self.epochs), prefetch=int(self.prefetch),
            drop_last=bool(self.drop_last), resume_epoch=self._epoch if resume else -1, consumed=self._consumed,
            augment=self._augment, augment_seed=self.augment_seed or 0, augment_threads=self.augment_threads,
            python_augment=[type(t).__name__ for t in self._stage.transforms] if self._stage is not None else [],
            ordered=not self.shuffle)
        self.name = self._job.info["name"]

    def batches(self, until_epoch_end=False):
        """Yields batches; with until_epoch_end, stops after the current epoch's last batch."""
        if self.epochs is not None and self._epoch >= self.epochs:
            raise exhausted(self.epochs, "Loader")
        while True:
            if self._stage is None:
                got = self._fetch()
                if got is None:
                    self.close()
                    return
                epoch, last, ids, labels, data = got
            else:
                try:
                    got = self._next_from_stage()
                except BaseException:  # a transform raised, a worker died, Ctrl-C: nothing in flight is consumed
                    self._drop_pending()
                    raise
                if got is None:
                    self.close()
                    return
                epoch, last, ids, labels, data = got
            self._skipped.update(self._job.take_skipped())
            self._consumed.extend(ids.tolist())
            if last:
                self._epoch, self._consumed = epoch + 1, []
            if len(ids):  # an empty batch only marks the end of an epoch whose last items were dropped
                yield Batch(ids, labels, data, epoch)
            if last and until_epoch_end:
                return

    def _fetch(self, final=True):
        """The daemon's next batch (epoch, last, ids, labels, data), or None after the last epoch;
        reconnects to a restarted daemon. final=False: as the Python stage takes it (NHWC uint8)."""
        self._check_process()
        if self._job is None:
            self._open()
        reopened = 0
        while True:
            try:
                if final:
                    return self._job.next(self.layout == "NCHW", self._to_float, self._erase)
                return self._job.next(False, None)
            except JoaderError as e:
                if e.code == ABORTED and reopened < 3:  # a batch that never arrived: its job again, exactly
                    reopened += 1
                    self._reconnect(e, daemon_lost=False)
                elif e.code == UNAVAILABLE and self.reconnect:
                    self._reconnect(e)
                else:  # the job has ended; the next pass re-opens it from this loader's state
                    self._abandon_job()
                    raise

    def _next_from_stage(self):
        """The oldest batch in flight in the Python stage, finished, keeping up to self._depth more
        in flight behind it (so that the workers run while the training loop does)."""
        while not self._fetched_all and len(self._pending) <= self._depth:
            got = self._fetch(final=False)
            if got is None:
                self._fetched_all = True
                break
            epoch, last, ids, labels, data = got
            ticket = self._stage.submit(self.augment_seed, epoch, ids.tolist(), data) if len(ids) else None
            self._pending.append((epoch, last, ids, labels, ticket))
        if not self._pending:
            return None
        epoch, last, ids, labels, ticket = self._pending[0]
        data = None
        if ticket is not None:
            out = self._stage.collect(ticket)
            data = to_batch(out, self.layout, self._to_float, self.augment_threads, self._erase, self.augment_seed or 0,
                            epoch, ids)
            self._stage.release(ticket)
        self._pending.popleft()
        return epoch, last, ids, labels, data

    def _drop_pending(self):
        """Forgets the batches in flight (their items were not consumed) and the job that sent them:
        the next pass re-opens the job from this loader's state, so they are delivered again."""
        if self._pending or self._job is not None:
            self._pending.clear()
            self._stage.reset()
            self._fetched_all = False
            self._abandon_job()

    def _abandon_pass(self):
        """Drops the batches in flight in the Python stage (their items were not consumed) and
        closes the job: the next fetch re-opens it from this loader's state."""
        if self._pending:
            self._pending.clear()
            self._stage.reset()
        self._fetched_all = False
        self._abandon_job()

    def __iter__(self):
        return self.batches()

    def _inherited(self):
        return self._pid != os.getpid()

    def _check_process(self):
        """A loader inherited through fork() is adopted by its new process if it had not started (no
        job, no workers); one that had started keeps its job in the process that started it."""
        if not self._inherited():
            return
        if self._job is None and not (self._stage is not None and self._stage.workers):
            self._pid = os.getpid()
            return
        raise error(FAILED_PRECONDITION,
                    f"this Loader belongs to process {self._pid}, from which this process was forked: its job "
                    f"'{self.name}' has one consumer, there. Make a new Loader in this process (Joader works in "
                    f"forked processes), or iterate this one in process {self._pid}")

    def _reconnect(self, lost, daemon_lost=True):
        """After losing the daemon: waits up to self.reconnect seconds for one to serve the socket
        again, then re-opens the job from this loader's own state (the daemon forgot it); batches
        in flight in the Python stage are dropped (they are delivered again). daemon_lost=False:
        the job's connection lost a batch (the daemon is there): re-opens the job on a new one."""
        socket = self.client.socket
        if daemon_lost:
            print(f"joader: job {self.name}: {lost}; waiting up to {self.reconnect:.0f} s for the daemon to come "
                  "back", file=sys.stderr, flush=True)
        else:
            print(f"joader: {lost}; re-opening the job from what it consumed (nothing is repeated or lost)",
                  file=sys.stderr, flush=True)
        self._abandon_pass()
        deadline = time.monotonic() + self.reconnect
        while True:
            try:
                client = Client(socket, start=self.client.start)  # a new connection: no backoff of the old one
                identity = job_state.identity(client.dataset(self.dataset))
                break
            except JoaderError as e:
                if e.code == NOT_FOUND:
                    raise error(NOT_FOUND, f"the daemon at {socket} came back without dataset '{self.dataset}' "
                                           f"(was it started with --state none?): add it again, then resume "
                                           f"with this loader's state_dict() as state=") from lost
                if e.code != UNAVAILABLE:
                    raise  # e.g. refused: the socket's new listener is not one this user can trust
                if time.monotonic() > deadline:
                    raise error(UNAVAILABLE, f"job {self.name}: the daemon at {socket} did not come back within "
                                             f"{self.reconnect:.0f} s ({lost})") from e
                time.sleep(0.2)
        job_state.check_resumable(self._identity, identity, self.dataset, "Loader")  # re-indexed over changed files: refused
        self.client = client
        self._open()
        print(f"joader: job {self.name}: reconnected; continuing epoch {self._epoch} with "
              f"{len(self._consumed)} items of it already consumed", file=sys.stderr, flush=True)

    def state_dict(self):
        """What this job has consumed: {"dataset", "epoch", "consumed"} (the items of the current
        epoch already yielded), "fingerprint" and "dataset_items" (the dataset's item list, so that a
        resume on changed files is refused), and "augment_seed" for an augmenting job (joader.state).
        Pass it back as Loader(..., state=...) or to load_state_dict() to resume: the remaining items
        get the crops they would have got."""
        return job_state.make(self.dataset, self._epoch, self._consumed, self._identity, self.augment_seed)

    def load_state_dict(self, state):
        """Restores this loader in place to `state` (a state_dict() of this job, even from another
        process), as Loader(..., state=state) would have made it: the next pass continues that
        epoch with exactly the items not consumed yet, with the state's augment_seed. A pass in
        progress is abandoned: its job ends, the batches in flight are dropped, and the pass goes
        on from `state`. Checked as state= is (ValueError, TypeError), changing nothing when refused."""
        epoch, consumed = job_state.position(state, self.dataset, self._identity, "Loader")
        seed = state.get(job_state.AUGMENT_SEED)
        if self._augmenting and seed is not None:
            seed = integer("augment_seed", seed, 0, 2**64 - 1)
        self._check_process()
        self._abandon_pass()
        self._epoch, self._consumed = epoch, consumed
        if self._augmenting and seed is not None:
            self.augment_seed = seed

    @property
    def skipped(self):
        """The item ids this job was not given because they could not be prepared (a dataset added
        with on_error="skip"), sorted; each file's path and reason are in the daemon's log."""
        return sorted(self._skipped)

    @property
    def wait_seconds(self):
        """Seconds this loader's consumer spent waiting for batches (from asking for the next batch
        to having it): near 0 when data keeps up with training, growing when training waits on data.
        The daemon sums the same figure per job (status "wait_seconds", metrics
        joader_job_wait_seconds_total)."""
        return self._waited + (self._job.wait_seconds if self._job is not None else 0.0)

    def close(self):
        """Ends the job in the daemon now, and its Python workers (also when the loader is
        garbage-collected)."""
        if self._pending and not self._own_stage and not self._inherited():
            self._stage.reset()  # a shared pool: their answers must not reach its next loader's batches
        self._pending.clear()
        self._fetched_all = False
        if self._own_stage and not self._inherited():
            self._stage.close()
        self._close_job()

    def _abandon_job(self):
        """Closes the job after an error or a lost daemon; a failure to close it changes nothing."""
        try:
            self._close_job()
        except JoaderError:
            pass

    def _close_job(self):
        if self._job is not None:
            if self._inherited():  # the parent's job, on the parent's connection: never touched here
                keep_forever(self._job)
                self._job = None
                return
            self._waited += self._job.wait_seconds
            self._job.close()
            self._job = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
