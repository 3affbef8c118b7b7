"""Per-job augmentation: torchvision transform objects, read into the ops Joader runs in C++ on
each delivered item (src/prep/augment.h), with torchvision's semantics and parameter law.

Supported: RandomResizedCrop (bilinear), RandomHorizontalFlip, Resize (an int: the shorter side;
bilinear), CenterCrop (square), alone or in a Compose (or a list); in joader.torch.DataLoader the
pipeline may end in ToTensor / PILToTensor (+ ConvertImageDtype) / Normalize (split_tensor_tail).
torchvision itself is not imported: the objects are read by their class names and attributes.
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


TENSOR_TAIL = "ToTensor, PILToTensor, ConvertImageDtype, Normalize"


def _items(augment):
    """The transforms of a pipeline, flattened (Compose and lists, nested or not)."""
    if augment is None:
        return []
    if isinstance(augment, (list, tuple)):
        items = list(augment)
    elif type(augment).__name__ == "Compose":
        items = list(augment.transforms)
    else:
        items = [augment]
    out = []
    for t in items:
        out += _items(t) if type(t).__name__ == "Compose" or isinstance(t, (list, tuple)) else [t]
    return out


def split_tensor_tail(augment):
    """(image transforms, tail) of a pipeline that ends in torchvision's tensor conversion, as the
    classification recipes do: `ToTensor()` or `PILToTensor()` (+ `ConvertImageDtype(torch.float)`),
    then optionally `Normalize(mean, std)`. tail is None without one, else {"float": bool, "mean":
    tuple or None, "std": tuple or None}: the batch is then what stacking torchvision's outputs
    gives. Raises JoaderError naming a tensor transform in the middle of the pipeline."""
    items = _items(augment)
    names = [type(t).__name__ for t in items]
    first = next((i for i, n in enumerate(names) if n in ("ToTensor", "PILToTensor")), None)
    if first is None:
        if any(n in ("ConvertImageDtype", "Normalize") for n in names):
            raise error(INVALID_ARGUMENT, "augment: ConvertImageDtype and Normalize take tensors: put ToTensor() or "
                                          "PILToTensor() before them")
        return augment, None
    tail = {"float": names[first] == "ToTensor", "mean": None, "std": None}
    for t, name in zip(items[first + 1:], names[first + 1:]):
        if name == "ConvertImageDtype" and not tail["float"] and str(t.dtype) in ("torch.float32", "torch.float"):
            tail["float"] = True
        elif name == "Normalize" and tail["float"] and tail["mean"] is None:
            tail["mean"], tail["std"] = tuple(float(m) for m in t.mean), tuple(float(s) for s in t.std)
            if len(tail["mean"]) != 3 or len(tail["std"]) != 3 or 0.0 in tail["std"]:
                raise error(INVALID_ARGUMENT, f"augment: Normalize: mean and std must have 3 values, std none 0 "
                                              f"(got mean={t.mean}, std={t.std})")
        else:
            what = f"{name}({getattr(t, 'dtype', '')})" if name == "ConvertImageDtype" else name
            raise error(INVALID_ARGUMENT, f"augment: after {names[first]}, Joader runs only ConvertImageDtype(torch.float) "
                                          f"(after PILToTensor) and then Normalize, not {what}: its per-item "
                                          f"transforms run before the tensor conversion ({SUPPORTED})")
    return items[:first], tail


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
    ops = []
    for t in _items(augment):
        name = type(t).__name__
        if name == "RandomResizedCrop":
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
        elif name in ("ToTensor", "PILToTensor", "ConvertImageDtype", "Normalize"):
            raise error(INVALID_ARGUMENT, f"augment: {name}: joader.Loader yields uint8 arrays; a pipeline that ends "
                                          f"in tensors ({TENSOR_TAIL}) runs in joader.torch.DataLoader")
        else:
            raise error(INVALID_ARGUMENT, f"augment: Joader cannot run {name} per item; it runs {SUPPORTED}, and at "
                                          f"the end of a joader.torch.DataLoader pipeline {TENSOR_TAIL}. Apply other "
                                          "transforms per batch (transform=, e.g. normalisation on the GPU)")
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
