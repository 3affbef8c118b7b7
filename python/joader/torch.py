"""joader.torch.DataLoader: a drop-in for torch.utils.data.DataLoader in a training loop.

    from joader.torch import DataLoader     # the one line that changes in a torch script
    train = datasets.ImageFolder("/data/train", transform=recipe)
    loader = DataLoader(train, batch_size=256, shuffle=True, num_workers=4, drop_last=True)
    for epoch in range(90):
        for images, labels in loader:        # one pass = one epoch of the job, as in torch
            ...

Every job on the same images shares their reading and decoding (one daemon, started by the first
loader when none serves); the dataset's transform runs per item (in C++ where Joader has the op,
else in worker processes), per-batch work (moving to the GPU, MixUp) in `transform=`.
"""
import math

import numpy as np
import torch
from torch.utils.data import default_collate

from .augment import derived_seed, fresh_seed, plan as augment_plan
from .client import Client, integer
from . import datasets
from .loader import Loader, augment_refusal, exhausted, item_ids, reconnect_seconds, subset_ids
from . import state as job_state
from .pool import PythonStage

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _distributed():
    """(rank, world_size) from torch.distributed when it is initialised, else None."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None


def _refuse_torch_only(batch_sampler, collate_fn, generator, timeout):
    """torch DataLoader arguments that mean nothing for a Joader job: ValueError saying why."""
    for name, value, why in (
            ("batch_sampler", batch_sampler, "give batch_size= (and drop_last=); the subset as indices="),
            ("collate_fn", collate_fn, "batches are stacked tensors; use transform=(images, labels) for per-batch work"),
            ("generator", generator, "the order is Joader's; augment_seed= makes augmentation reproducible, seed= "
                                     "the data-parallel partition")):
        if value is not None:
            raise ValueError(f"{name}= is not supported by joader.torch.DataLoader: {why}")
    if timeout:
        raise ValueError("timeout= is not supported: Joader does not hang silently (a job that cannot be served gets "
                         "an error within seconds, a dead worker is an error, Ctrl-C works); leave it at 0")


def _sampler_meaning(sampler, dataset, shuffle):
    """What torch's `sampler=` means for a Joader job: (indices or None, shuffle, DistributedSampler
    or None). SubsetRandomSampler(ids) is indices=ids, RandomSampler() shuffle=True,
    SequentialSampler shuffle=False, DistributedSampler the job's data-parallel rank (with its
    seed, shuffle, drop_last and set_epoch); others are refused."""
    from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler, SubsetRandomSampler
    if sampler is None:
        return None, shuffle, None
    if shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")  # torch's own words
    kind = type(sampler).__name__
    if isinstance(sampler, DistributedSampler):
        if sampler.dataset is not dataset:
            raise ValueError("the DistributedSampler is over another dataset than the DataLoader's")
        return None, sampler.shuffle, sampler
    if isinstance(sampler, SubsetRandomSampler):
        return [int(i) for i in sampler.indices], True, None
    if isinstance(sampler, RandomSampler):
        if sampler.replacement or sampler._num_samples is not None:
            raise ValueError("RandomSampler(replacement=True) or with num_samples is not supported: a Joader job "
                             "gives each item of its subset exactly once per epoch")
        return None, True, None
    if isinstance(sampler, SequentialSampler):
        return None, False, None
    raise ValueError(f"sampler={kind} is not supported by joader.torch.DataLoader: it takes DistributedSampler, "
                     "SubsetRandomSampler, RandomSampler (without replacement) and SequentialSampler; give a subset "
                     "as indices=")


def partition(n, world_size, rank, seed, epoch, drop_last=False, shuffle=True):
    """Positions (into the job's subset) of rank `rank`'s part of epoch `epoch`: the law of
    torch.utils.data.DistributedSampler: a uniform permutation drawn from (seed, epoch) (with
    shuffle=False the subset's order), padded by repeating its head (or cut, with drop_last) to a
    multiple of world_size, dealt round-robin."""
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        perm = torch.randperm(n, generator=g).tolist()
    else:
        perm = list(range(n))
    if drop_last:
        perm = perm[: n - n % world_size]
    else:
        pad = -n % world_size
        perm += (perm * math.ceil(pad / max(n, 1)))[:pad]
    return perm[rank::world_size]


class DataLoader:
    """Yields (images, labels) tensors; each pass over it is one epoch of the job.

    dataset: a torchvision ImageFolder or DatasetFolder with the default image loader, or a
    torch.utils.data.Subset of one (its transform is the per-item pipeline, its target_transform
    applies to labels; joader.datasets), or a dataset name known to the daemon (see `augment`).
    `loader.dataset` is what was given. indices: the job's subset (default all items): positions in
    the given dataset.
    epochs: passes allowed (None, the default: as many as the loop makes, like torch's
    DataLoader; a pass beyond an explicit epochs raises JoaderError). The job stays registered
    between passes, so the daemon keeps preparing ahead, until close() (or `with`, or garbage
    collection) ends it. layout: "NCHW" (default) or "NHWC". dtype: torch.uint8
    (default) or torch.float32 (scaled to [0, 1] and normalised with mean/std). transform: an
    optional callable (images, labels) -> (images, labels) applied per batch (per-job
    augmentation). rank/world_size: data-parallel training (taken from torch.distributed when it
    is initialised): the ranks of one job together receive each item of each epoch exactly once,
    with DistributedSampler's partition law (seed shared by all ranks). state: a state_dict() to
    resume from, mid-epoch. with_indices: yield (images, labels, item ids) instead. augment:
    torchvision transforms run per item in C++ on a decoded dataset (see joader.Loader), e.g.
    T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]); augment_seed: None for a fresh
    seed per job, an int for reproducible crops; it is part of state_dict(). reconnect: after a
    daemon restart, continue the job exactly where it was (see joader.Loader); True waits up to 60 s.

    augment may be any torchvision pipeline, ending in tensors or not: what Joader runs natively
    runs in C++, the rest per item in `num_workers` worker processes (None: augment_threads of them;
    0: in this process), started with `multiprocessing_context` ("fork" by default, as torch's),
    `worker_init_fn(worker_id)` called in each; `prefetch_factor` batches (default 2) are in the
    workers' hands ahead of the one the loop trains on. shuffle=True: each epoch uniformly random
    (shared with the other jobs); shuffle=False: in the dataset's (the Subset's, the indices')
    order, as torch's SequentialSampler; left out: False for a dataset object, as in torch, True
    for a dataset name. sampler: DistributedSampler(ds, num_replicas, rank, shuffle=, seed=,
    drop_last=) makes this the job's rank, each pass the epoch its set_epoch() chose (the ranks'
    parts are the sampler's own); SubsetRandomSampler(ids) is indices=ids; RandomSampler() (without
    replacement) is shuffle=True, SequentialSampler shuffle=False. torch's arguments that have no
    meaning here are refused with the reason (other samplers, batch_sampler, collate_fn, generator,
    timeout);
    pin_memory=True pins each batch when CUDA is available (else nothing, as torch 1.13);
    persistent_workers is accepted (the workers always persist until close()).
    """

    def __init__(self, dataset, batch_size=1, indices=None, epochs=None, name=None, client=None, rank=None,
                 world_size=None, state=None, layout="NCHW", dtype=None, mean=IMAGENET_MEAN,
                 std=IMAGENET_STD, transform=None, drop_last=False, seed=0, prefetch=4, with_indices=False,
                 augment=None, augment_seed=None, augment_threads=2, reconnect=True, num_workers=None,
                 worker_init_fn=None, multiprocessing_context=None, prefetch_factor=None, persistent_workers=False,
                 pin_memory=False, shuffle=None, sampler=None, batch_sampler=None, collate_fn=None, generator=None,
                 timeout=0):
        _refuse_torch_only(batch_sampler, collate_fn, generator, timeout)
        self.dataset = dataset  # what the caller gave, as torch's loader.dataset
        served = None if isinstance(dataset, str) else datasets.describe(dataset)
        sampled, shuffle, self._sampler = _sampler_meaning(sampler, dataset, shuffle)
        # torch's default order (shuffle=False) for a dataset object, as the script it drops into
        # expects; Joader's (uniformly random) for a dataset name, as ever.
        self.shuffle = bool(shuffle) if shuffle is not None else served is None
        if sampled is not None:
            if indices is not None:
                raise ValueError("give the subset once: as indices= or as a SubsetRandomSampler")
            indices = sampled
        target_transform = None
        if served is not None:
            if augment is not None and served.transform is not None:
                raise ValueError("the dataset's transform is the per-item pipeline; augment= would be a second one: "
                                 "leave augment out")
            augment = augment if served.transform is None else served.transform
            if augment is None:
                raise ValueError(f"the {type(served.base).__name__} has no transform, so its items are PIL images, "
                                 "which a DataLoader cannot batch: give it a transform that ends in tensors, e.g. "
                                 "T.Compose([T.RandomResizedCrop(224), T.ToTensor()])")
            target_transform = served.target_transform
            if indices is not None:  # positions in the caller's dataset (a Subset's own)
                indices = item_ids(indices)[0].tolist()
                if served.ids is not None:
                    n = len(served.ids)
                    bad = [i for i in indices if not -n <= i < n]
                    if bad:
                        raise IndexError(f"index {bad[0]} is out of range for a dataset of {n} items")
                    indices = [served.ids[i] for i in indices]
            elif served.ids is not None:
                indices = served.ids
        self._target_transform = target_transform
        if layout not in ("NCHW", "NHWC"):
            raise ValueError("layout must be 'NCHW' or 'NHWC'")
        if dtype not in (None, torch.uint8, torch.float32):
            raise ValueError("dtype must be torch.uint8 or torch.float32")
        plan = augment_plan(augment)
        tail = plan.tail
        # A ToTensor run in Python (a tensor transform such as RandomErasing after it): the batch is
        # the stack of the pipeline's own tensors.
        python_tensors = any(type(t).__name__ in ("ToTensor", "PILToTensor") for t in plan.python)
        if tail is not None or python_tensors:  # the pipeline's own tensor conversion decides dtype and normalisation
            ends = "PILToTensor" if tail is not None and not tail["float"] else "ToTensor/ConvertImageDtype"
            if python_tensors:
                ends = "tensor transforms"
            if layout != "NCHW":
                raise ValueError(f"augment ends in {ends}, which give [C, H, W] tensors: layout must be 'NCHW'")
            if tail is not None and dtype == torch.float32 and not tail["float"]:
                raise ValueError("augment ends in PILToTensor (uint8 tensors) but dtype=torch.float32: add "
                                 "T.ConvertImageDtype(torch.float) to the pipeline, or leave dtype out")
            if mean is not IMAGENET_MEAN or std is not IMAGENET_STD:
                raise ValueError("augment ends in tensors: its Normalize, if any, is the normalisation; mean= and "
                                 "std= would normalise a second time: leave them out")
            if tail is not None:
                dtype = torch.float32 if tail["float"] else torch.uint8
                mean, std = tail["mean"], tail["std"]
        self._expected_dtype = dtype  # checked against a Python tensor tail's batches
        if dtype is None:
            dtype = torch.uint8
        self.pin_memory = bool(pin_memory)
        self._pin = self.pin_memory and torch.cuda.is_available()  # as torch 1.13: without CUDA, silently not
        self.persistent_workers = bool(persistent_workers)
        self._partition_drop_last = drop_last
        if self._sampler is not None:
            if rank is not None or world_size is not None:
                raise ValueError("give the rank once: as rank=/world_size= or as a DistributedSampler")
            rank, world_size = self._sampler.rank, self._sampler.num_replicas
            seed, self._partition_drop_last = self._sampler.seed, self._sampler.drop_last
        dist = _distributed()
        if rank is None and world_size is None and dist is not None:
            rank, world_size = dist
        self.world_size = 1 if world_size is None else integer("world_size", world_size, 1)
        self.rank = 0 if rank is None else integer("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, {self.world_size})")
        batch_size = integer("batch_size", batch_size, 1)
        epochs = None if epochs is None else integer("epochs", epochs, 1)
        seed = integer("seed", seed)
        self.batch_size, self.epochs, self.name = batch_size, epochs, name
        self.layout, self.dtype, self.transform = layout, dtype, transform
        self.drop_last, self.seed, self.prefetch, self.with_indices = drop_last, seed, prefetch, with_indices
        # float32 batches are converted by the native gather in the pass that writes them: () scales
        # to [0, 1] only (a pipeline whose ToTensor has no Normalize after it), else (mean, std).
        self._to_float = None if dtype != torch.float32 or python_tensors else (
            () if mean is None else (tuple(float(m) for m in mean), tuple(float(s) for s in std)))
        self._python_tensors = python_tensors
        self._erase = tail["erase"] if tail is not None else None
        self._augment = plan
        self.augment_threads = integer("augment_threads", augment_threads, 1)
        self.reconnect = reconnect_seconds(reconnect)
        self.num_workers = self.augment_threads if num_workers is None else integer("num_workers", num_workers, 0)
        depth = 2 if prefetch_factor is None else integer("prefetch_factor", prefetch_factor, 1)
        self._depth = depth
        self._stage = None
        if plan.python:
            self._stage = PythonStage(plan.python, self.num_workers, worker_init_fn, multiprocessing_context)
        augment_seed = job_state.augment_seed(augment_seed, state)
        self.augment_seed = None
        augmenting = plan.augmenting
        if augmenting:
            self.augment_seed = fresh_seed() if augment_seed is None else integer("augment_seed", augment_seed, 0,
                                                                                   2**64 - 1)
        self.client = client or Client(start=True)  # one connection for the job's set-up and its loaders
        if served is not None:
            dataset = datasets.register(self.client, served.base)
        self._name = dataset  # the daemon's name of the dataset
        self._subset = None if indices is None else subset_ids(self.client, dataset, indices)
        info = self.client.dataset(dataset)
        refusal = augment_refusal(plan, info, dataset)
        if refusal:
            raise ValueError(refusal)
        if not plan.resizing and not info["raw"] and info["height"] == 0:
            raise ValueError(f"dataset '{dataset}' stores images at their own size: give augment= (e.g. "
                             "T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]), or "
                             "T.Compose([T.Resize(256), T.CenterCrop(224)]) to evaluate) so that batches have "
                             "one size")
        self._identity = job_state.identity(info)
        self._loader = None
        self._waited = 0.0  # by the per-epoch loaders of a data-parallel job that are closed
        self._skipped = set()  # by those loaders
        self._restore(state)

    def _restore(self, state):
        """Starts over from `state` (None: the job's beginning), checked first: the next pass
        continues the state's epoch with exactly the items not consumed yet."""
        self._epoch = 0 if state is None else job_state.position(state, self._name, self._identity, "DataLoader")[0]
        if self._loader is not None:
            self._loader.close()
            self._loader = None
        self._state = state
        if self.world_size == 1:
            self._loader = self._make_loader(self._subset, self.epochs, state)

    def _make_loader(self, indices, epochs, state, augment_seed=None):
        loader = Loader(self._name, name=self.name, indices=indices, batch_size=self.batch_size, epochs=epochs,
                      client=self.client, state=state, drop_last=self.drop_last, prefetch=self.prefetch,
                      augment=self._augment, augment_seed=augment_seed if augment_seed is not None else self.augment_seed,
                      augment_threads=self.augment_threads, layout=self.layout, reconnect=self.reconnect,
                      shuffle=self.shuffle, _stage=self._stage, _to_float=self._to_float, _erase=self._erase,
                      _depth=self._depth)
        return loader

    def _subset_size(self):
        """The job's items per epoch, all ranks together (a rank's open loader holds only its part)."""
        if self._subset is not None:
            return len(self._subset)
        return self._identity[job_state.DATASET_ITEMS]

    def _rank_part(self, epoch):
        n = self._subset_size()
        positions = partition(n, self.world_size, self.rank, self.seed, epoch, self._partition_drop_last,
                              self.shuffle)
        return np.asarray(positions) if self._subset is None else self._subset[positions]

    def __len__(self):
        """Batches per epoch (per rank)."""
        n = self._subset_size()
        if self.world_size > 1:
            n = n // self.world_size if self._partition_drop_last else math.ceil(n / self.world_size)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _to_tensors(self, batch):
        # Already in self.layout and dtype: the Loader gathers it so (float32 with torchvision's
        # ToTensor + Normalize arithmetic; src/client/layout.h, to_float).
        images = torch.from_numpy(batch.data)
        labels = torch.from_numpy(batch.labels)
        if self._python_tensors and self._expected_dtype is not None and images.dtype != self._expected_dtype:
            raise ValueError(f"augment gives {images.dtype} tensors but dtype={self._expected_dtype}: leave dtype "
                             "out (the pipeline's tensors are the batch), or change the pipeline")
        if self._target_transform is not None:  # per label, as the dataset's __getitem__ applies it
            labels = default_collate([self._target_transform(int(label)) for label in batch.labels])
        if self._pin:
            images, labels = images.pin_memory(), labels.pin_memory()
        if self.transform is not None:
            images, labels = self.transform(images, labels)
        if self.with_indices:
            return images, labels, torch.from_numpy(batch.indices)
        return images, labels

    def _settle(self):
        """Takes in an epoch that the current loader finished, whether its pass ran to the end or
        the training loop broke out right after the epoch's last batch (which a generator never
        sees): a data-parallel rank's one-epoch loader is closed and the next epoch is due."""
        if self._loader is None:
            return
        if self.world_size == 1:
            self._epoch = self._loader.epoch
        elif self._loader.epoch > 0:
            self._loader.close()
            self._waited += self._loader.wait_seconds
            self._skipped.update(self._loader.skipped)
            self._loader, self._state = None, None
            self._epoch += 1

    def __iter__(self):
        self._settle()
        if self.epochs is not None and self._epoch >= self.epochs:
            raise exhausted(self.epochs, "DataLoader")
        if self._sampler is not None and self.world_size > 1 and self._sampler.epoch != self._epoch:
            # set_epoch(e) chose the epoch of this pass (torch's DistributedSampler law): a part of
            # another epoch left by a `break` is abandoned, as torch starts the new epoch afresh.
            if self._loader is not None:
                self._loader.close()
                self._loader, self._state = None, None
            self._epoch = self._sampler.epoch
        if self.world_size > 1 and self._loader is None:
            # Each epoch, this rank's part of the DistributedSampler-style partition is one
            # one-epoch job; a resumed epoch skips what was consumed.
            part = self._rank_part(self._epoch)
            state = None
            if self._state is not None and int(self._state[job_state.EPOCH]) == self._epoch:
                state = job_state.make(self._name, 0, self._state[job_state.CONSUMED], self._identity)
            # Each epoch is a one-epoch job (the daemon counts it as epoch 0): the crops' seed is
            # derived from the job's seed, this rank and the real epoch, so ranks and epochs differ.
            seed = None if self.augment_seed is None else derived_seed(self.augment_seed, self.rank, self._epoch)
            self._loader = self._make_loader(part, 1, state, seed)
        # Leaving the loop early (break) leaves the rest of the epoch to the next pass: nothing is
        # lost or repeated.
        for batch in self._loader.batches(until_epoch_end=True):
            yield self._to_tensors(batch)
        self._settle()

    def state_dict(self):
        """{"dataset", "epoch", "consumed", "fingerprint", "dataset_items"} (and "augment_seed";
        joader.state): pass back as DataLoader(..., state=...) or to load_state_dict() to resume
        (refused if the dataset's files changed)."""
        epoch, consumed = self._epoch, []
        if self._loader is not None:
            loader = self._loader.state_dict()
            if self.world_size == 1:
                epoch, consumed = loader[job_state.EPOCH], loader[job_state.CONSUMED]
            elif loader[job_state.EPOCH] > 0:  # this rank's part of the epoch is done
                epoch = self._epoch + 1
            else:
                consumed = loader[job_state.CONSUMED]
        return job_state.make(self._name, epoch, consumed, self._identity, self.augment_seed)

    def load_state_dict(self, state):
        """Restores this loader in place to `state` (a state_dict() of this job, even from another
        process), as DataLoader(..., state=state) would have made it, for checkpointers that restore
        objects in place (torchdata's Stateful protocol): the next pass continues that epoch with
        exactly the items not consumed yet, with the state's augment_seed. A pass in progress is
        abandoned. Checked as state= is (ValueError, TypeError), changing nothing when refused."""
        job_state.position(state, self._name, self._identity, "DataLoader")
        seed = state.get(job_state.AUGMENT_SEED)
        if self.augment_seed is not None and seed is not None:
            self.augment_seed = integer("augment_seed", seed, 0, 2**64 - 1)
        self._restore(state)

    @property
    def skipped(self):
        """Item ids this job was not given because they could not be prepared (on_error="skip"),
        sorted (see Loader.skipped)."""
        return sorted(self._skipped | set(self._loader.skipped if self._loader is not None else ()))

    @property
    def wait_seconds(self):
        """Seconds this job's training loop spent waiting for batches (see Loader.wait_seconds)."""
        return self._waited + (self._loader.wait_seconds if self._loader is not None else 0.0)

    def close(self):
        """Ends the job in the daemon now, and its Python workers (also on leaving a `with` block,
        or when collected)."""
        if self._loader is not None:
            self._loader.close()
        if self._stage is not None:
            self._stage.close()

    def __del__(self):
        try:
            if self._stage is not None:
                self._stage.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
