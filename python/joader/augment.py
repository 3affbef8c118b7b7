"""Per-job augmentation: torchvision transform objects, read into the ops Joader runs in C++ on
each delivered item (src/prep/augment.h), with torchvision's semantics and parameter law.

Supported: RandomResizedCrop (bilinear), RandomHorizontalFlip, Resize (an int: the shorter side;
bilinear), CenterCrop (square), alone or in a Compose (or a list). torchvision itself is not
imported: the objects are read by their class names and attributes.
"""
import secrets

from . import _native
from .client import INVALID_ARGUMENT, error

SUPPORTED = "RandomResizedCrop, RandomHorizontalFlip, Resize, CenterCrop (alone, in a list or in a Compose)"
RANDOM_RESIZED_CROP, RANDOM_HORIZONTAL_FLIP, RESIZE, CENTER_CROP = range(4)


def _square(size, name):
    if isinstance(size, int):
        return size
    size = tuple(size)
    if len(size) == 1:
        return int(size[0])
    if len(size) == 2 and size[0] == size[1]:
        return int(size[0])
    raise error(INVALID_ARGUMENT, f"augment: {name}: size {size} is not square; batches are [B, 3, S, S]")


def _bilinear(transform, name):
    mode = getattr(transform, "interpolation", None)
    value = getattr(mode, "value", mode)
    if value not in ("bilinear", 2, None):
        raise error(INVALID_ARGUMENT, f"augment: {name}: only bilinear interpolation is supported, not {value}")


def ops_from(augment):
    """augment (a torchvision transform, a Compose, or a list of them, nested or not) as op tuples
    for the native module; [] for None. Raises JoaderError (INVALID_ARGUMENT) naming what it cannot
    run or what is wrong with the pipeline."""
    if augment is None:
        return []
    ops = _flatten(augment)
    _native.check_augment(ops)
    return ops


def _flatten(augment):
    if isinstance(augment, (list, tuple)):
        items = list(augment)
    elif type(augment).__name__ == "Compose":
        items = list(augment.transforms)
    else:
        items = [augment]
    ops = []
    for t in items:
        name = type(t).__name__
        if name == "Compose" or isinstance(t, (list, tuple)):
            ops += _flatten(t)
        elif name == "RandomResizedCrop":
            _bilinear(t, name)
            (s0, s1), (r0, r1) = t.scale, t.ratio
            ops.append((RANDOM_RESIZED_CROP, _square(t.size, name), float(s0), float(s1), float(r0), float(r1), 0.0))
        elif name == "RandomHorizontalFlip":
            ops.append((RANDOM_HORIZONTAL_FLIP, 0, 0.0, 0.0, 0.0, 0.0, float(t.p)))
        elif name == "Resize":
            _bilinear(t, name)
            size = t.size
            if not isinstance(size, int) and len(tuple(size)) != 1:
                raise error(INVALID_ARGUMENT, f"augment: Resize: only Resize(S) (shorter side to S) is supported, "
                                              f"not size {tuple(size)}")
            if getattr(t, "max_size", None) is not None:
                raise error(INVALID_ARGUMENT, "augment: Resize: max_size is not supported")
            ops.append((RESIZE, _square(size, name), 0.0, 0.0, 0.0, 0.0, 0.0))
        elif name == "CenterCrop":
            ops.append((CENTER_CROP, _square(t.size, name), 0.0, 0.0, 0.0, 0.0, 0.0))
        else:
            raise error(INVALID_ARGUMENT, f"augment: Joader cannot run {name} per item; it runs {SUPPORTED}. "
                                          "Apply other transforms per batch (transform=, e.g. normalisation on the GPU)")
    return ops


def fresh_seed():
    """A seed for a job that asked for none: independent of every other job's."""
    return secrets.randbits(63)


def derived_seed(seed, *parts):
    """A seed for a part of a job (a rank, an epoch), well mixed from the job's seed (SplitMix64)."""
    z = seed & 0xFFFFFFFFFFFFFFFF
    for p in parts:
        z = (z + 0x9E3779B97F4A7C15 * (int(p) + 1)) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        z ^= z >> 31
    return z
