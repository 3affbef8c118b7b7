"""Per-job augmentation: a pipeline of torchvision (or any) transforms, planned into the ops
Joader runs in C++ on each delivered item (src/prep/augment.h, torchvision's semantics and
parameter law) and the rest, which runs per item in Python (joader.pool).

Native: RandomResizedCrop (square), RandomHorizontalFlip, Resize (an int: the shorter side), both
bilinear, bicubic or nearest, CenterCrop (square), RandomCrop (square, constant padding), Pad
(constant), ColorJitter,
TrivialAugmentWide / RandAugment / AutoAugment (nearest or bilinear, once a crop has fixed the
size), RandomPosterize / RandomSolarize / RandomAutocontrast / RandomEqualize /
RandomAdjustSharpness / RandomInvert / RandomGrayscale / Grayscale(3) / RandomVerticalFlip,
RandomAffine and RandomRotation (nearest or bilinear, without expand), as the longest prefix
that ends in one size;
in joader.torch.DataLoader a pipeline's final ToTensor / PILToTensor (+ ConvertImageDtype) /
Normalize (+ RandomErasing) is fused into the batch's write (_tensor_tail). Everything else runs
in Python, exactly as torchvision (or the user's code) runs it. torchvision is not imported: the objects are read by
their class names and attributes.
"""
import math
import re
import secrets
from dataclasses import dataclass, field

from . import _native
from .client import INVALID_ARGUMENT, error

# A native op is the protocol's AugmentOp (proto/joader.proto) in protobuf's JSON form, as a dict
# of one entry: {kind: fields}, kind the field of the op family's message (src/prep/ops/list.h),
# e.g. {"random_crop": {"size": 32, "padding": {"left": 4, ...}}}. _native_op below maps
# torchvision's classes to them.
AUTO_AUGMENT, RANDOM_AFFINE, RANDOM_CROP = "auto_augment", "random_affine", "random_crop"
# What each kind does to an image's size, from the native op table: "keeps", "fixes" (size×size)
# or "resizes".
_SIZING = {kind: sizing for _, kind, sizing in _native.op_families()}


def op_kind(op):
    """A native op's kind: "random_resized_crop", "auto_augment", ..."""
    (kind,) = op
    return kind


def _op(kind, **fields):
    """The native op of `kind` with these fields (None ones left out: the protocol's absent)."""
    return {kind: {name: _json_value(value) for name, value in fields.items() if value is not None}}


def _json_value(value):
    """value with its non-finite floats as protobuf's JSON writes them ("NaN", "Infinity"), so that
    the native validation, not the parser, names the op and field that holds one."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def _range(pair):
    low, high = pair
    return {"min": float(low), "max": float(high)}

# torchvision's _apply_op names, then two more single ops, as prep/autoaugment.h's ImageOp codes
# (the protocol spells them SHEAR_X ...: _wire_name).
IMAGE_OPS = ("Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
             "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert", "Grayscale", "VerticalFlip")
AUTO_AUGMENT_FAMILIES = ("TrivialAugmentWide", "RandAugment", "AutoAugment")


def _wire_name(name):
    """A CamelCase name as the protocol's enums spell it: "ShearX" -> "SHEAR_X"."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


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


def _tensor_tail(items):
    """The tail a pipeline ends in, from its tensor conversion on (items[0] is ToTensor or
    PILToTensor), if Joader fuses it into the batch's write: `ToTensor()` or `PILToTensor()` (+
    `ConvertImageDtype(torch.float)`), then optionally `Normalize(mean, std)` of 3 channels, then
    optionally a final `RandomErasing`. {"float": bool, "mean", "std": tuples or None, "erase":
    (p, scale_min, scale_max, ratio_min, ratio_max, 3 values or None for 'random') or None}; None
    when the tail holds anything else (it then runs in Python)."""
    tail = {"float": type(items[0]).__name__ == "ToTensor", "mean": None, "std": None, "erase": None}
    for n, t in enumerate(items[1:], 1):
        name = type(t).__name__
        if name == "ConvertImageDtype" and not tail["float"] and str(t.dtype) in ("torch.float32", "torch.float"):
            tail["float"] = True
        elif name == "Normalize" and tail["float"] and tail["mean"] is None:
            mean, std = tuple(float(m) for m in t.mean), tuple(float(s) for s in t.std)
            if len(mean) != 3 or len(std) != 3 or 0.0 in std:
                return None
            tail["mean"], tail["std"] = mean, std
        elif name == "RandomErasing" and tail["float"] and n == len(items) - 1:
            value = t.value
            if isinstance(value, str):
                if value != "random":
                    return None
                values = None
            else:
                values = tuple(float(v) for v in value) if isinstance(value, (list, tuple)) else (float(value),)
                if len(values) == 1:
                    values *= 3
                if len(values) != 3:
                    return None
            (s0, s1), (r0, r1) = t.scale, t.ratio
            tail["erase"] = (float(t.p), float(s0), float(s1), float(r0), float(r1), values)
        else:
            return None
    return tail


def _interpolation(transform):
    mode = getattr(transform, "interpolation", None)
    return getattr(mode, "value", mode)


def _resample(transform):
    """A RandomResizedCrop's or Resize's interpolation as the protocol names it ("BILINEAR",
    "NEAREST", "BICUBIC"; PIL's codes are 2, 0, 3); None for the others (they run in Python)."""
    return {"bilinear": "BILINEAR", 2: "BILINEAR", None: "BILINEAR", "nearest": "NEAREST", 0: "NEAREST",
            "bicubic": "BICUBIC", 3: "BICUBIC"}.get(_interpolation(transform))


def _affine_resample(transform):
    """A nearest or bilinear interpolation, which the native affine ops take, as the protocol names
    it; None for the others (they run in Python)."""
    return {"nearest": "NEAREST", 0: "NEAREST", "bilinear": "BILINEAR", 2: "BILINEAR"}.get(_interpolation(transform))


def _square_size(size):
    """The side of a square size (an int, [S] or (S, S)), else None."""
    if isinstance(size, int):
        return size
    size = tuple(size)
    if len(size) == 1 or (len(size) == 2 and size[0] == size[1]):
        return int(size[0])
    return None


def _fill(fill):
    """torchvision's fill of a PIL image (F_pil._parse_fill: None is 0, a number every band, each
    value int()) as 3 bytes, or None when Joader does not take it (another length or range)."""
    if fill is None:
        fill = 0
    values = [fill] * 3 if isinstance(fill, (int, float)) else list(fill)
    if len(values) != 3:
        return None
    values = [int(v) for v in values]
    return values if all(0 <= v <= 255 for v in values) else None


def _auto_augment_op(t, side):
    """TrivialAugmentWide / RandAugment / AutoAugment on side×side images as the AUTO_AUGMENT op:
    the op space exactly as torchvision builds it (its own _augmentation_space, so the magnitudes
    are torch's float32 values); None when an op or an argument is one Joader does not run
    natively (AugMix, bicubic, an unknown op name)."""
    name = type(t).__name__
    interpolation = _affine_resample(t)
    fill = _fill(getattr(t, "fill", None))
    if interpolation is None or fill is None or side is None:
        return None
    entries = []  # (op, p, signed, magnitudes)
    policy_size, num_ops = 2, 1
    try:
        if name == "AutoAugment":
            space = t._augmentation_space(10, (side, side))
            for policy in t.policies:
                if len(policy) != policy_size:
                    return None
                for op_name, p, magnitude_id in policy:
                    magnitudes, signed = space[op_name]
                    values = [] if magnitude_id is None else [float(magnitudes[magnitude_id].item())]
                    entries.append((op_name, float(p), signed, values))
        else:
            if name == "RandAugment":
                space = t._augmentation_space(t.num_magnitude_bins, (side, side))
                num_ops = int(t.num_ops)
            else:  # TrivialAugmentWide's space does not depend on the size
                space = t._augmentation_space(t.num_magnitude_bins)
            for op_name, (magnitudes, signed) in space.items():
                if magnitudes.ndim == 0:
                    values = []
                elif name == "RandAugment":
                    values = [float(magnitudes[t.magnitude].item())]
                else:
                    values = [float(m) for m in magnitudes.tolist()]
                entries.append((op_name, 1.0, signed, values))
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return None
    if any(op_name not in IMAGE_OPS for op_name, *_ in entries):
        return None
    return _op(AUTO_AUGMENT, family=_wire_name(name), num_ops=num_ops, interpolation=interpolation, fill=fill,
               policy_size=policy_size, entries=[_entry(op_name, p, signed, values)
                                                 for op_name, p, signed, values in entries])


def _entry(op_name, p, signed, magnitudes):
    """One op of an AUTO_AUGMENT op's space or policy."""
    return {"op": _wire_name(op_name), "p": float(p), "is_signed": bool(signed),
            "magnitudes": [float(m) for m in magnitudes]}


def _random_apply_op(t):
    """torchvision's single random ops (`if torch.rand(1) < self.p: F.op(img, ...)`) as the
    AUTO_AUGMENT op of the RANDOM_APPLY family (one entry: op, p, magnitude); None when not taken."""
    name = type(t).__name__
    p = float(getattr(t, "p", 1.0))
    magnitude = []
    if name == "RandomPosterize":
        op, magnitude = "Posterize", [int(t.bits)]
    elif name == "RandomSolarize":
        op, magnitude = "Solarize", [float(t.threshold)]
    elif name == "RandomAdjustSharpness":
        factor = float(t.sharpness_factor)
        if 1.0 + (factor - 1.0) != factor:  # _apply_op's 1 + magnitude must give the factor exactly
            return None
        op, magnitude = "Sharpness", [factor - 1.0]
    elif name in ("RandomAutocontrast", "RandomEqualize", "RandomInvert"):
        op = {"RandomAutocontrast": "AutoContrast", "RandomEqualize": "Equalize", "RandomInvert": "Invert"}[name]
    elif name == "RandomGrayscale":
        op = "Grayscale"
    elif name == "Grayscale":
        if int(t.num_output_channels) != 3:
            return None
        op, p = "Grayscale", 1.0
    elif name == "RandomVerticalFlip":
        op = "VerticalFlip"
    else:
        return None
    if not 0.0 <= p <= 1.0:
        return None
    return _op(AUTO_AUGMENT, family="RANDOM_APPLY", policy_size=1, entries=[_entry(op, p, False, magnitude)])


def _random_affine_op(t):
    """RandomAffine, or RandomRotation without expand, with nearest or bilinear resampling, as the
    RANDOM_AFFINE op; None otherwise."""
    name = type(t).__name__
    interpolation = _affine_resample(t)
    fill = _fill(t.fill)
    if interpolation is None or fill is None:
        return None
    degrees = [float(d) for d in t.degrees]
    center = None if t.center is None else [float(c) for c in t.center]
    if len(degrees) != 2 or (center is not None and len(center) != 2):
        return None
    translate = scale = None
    shear = []
    if name == "RandomRotation":
        if t.expand:
            return None
    else:
        translate = None if t.translate is None else [float(v) for v in t.translate]
        scale = None if t.scale is None else [float(v) for v in t.scale]
        shear = [] if t.shear is None else [float(v) for v in t.shear]
        if (translate is not None and len(translate) != 2) or (scale is not None and len(scale) != 2) \
                or len(shear) not in (0, 2, 4):
            return None
    xy = None if center is None else {"x": center[0], "y": center[1]}
    return _op(RANDOM_AFFINE, rotation=name == "RandomRotation", degrees=_range(degrees),
               translate=None if translate is None else {"x": translate[0], "y": translate[1]},
               scale=None if scale is None else _range(scale), shear=shear, interpolation=interpolation, fill=fill,
               center=xy)


def _padding4(padding):
    """F.pad's padding (an int, or 1, 2 or 4 ints) as (left, top, right, bottom); None for another
    form. (_padding as the protocol's Padding.)"""
    if isinstance(padding, int):
        return (padding,) * 4
    padding = tuple(padding)
    if not all(isinstance(v, int) for v in padding):  # torchvision's PIL path refuses floats: Python says so
        return None
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:  # (left/right, top/bottom), as F.pad reads it
        return (padding[0], padding[1], padding[0], padding[1])
    return padding if len(padding) == 4 else None


def _padding(padding4):
    return dict(zip(("left", "top", "right", "bottom"), padding4))


def _pad_op(t):
    """Pad(padding, fill, padding_mode="constant") as the PAD op; None otherwise (another mode, a
    negative padding, one above the native ops' 8192)."""
    fill, padding = _fill(t.fill), _padding4(t.padding)
    if fill is None or padding is None or t.padding_mode != "constant" or min(padding) < 0 or max(padding) > 8192:
        return None
    return _op("pad", padding=_padding(padding), fill=fill)


def _random_crop_op(t):
    """RandomCrop(size, padding, pad_if_needed, fill, padding_mode="constant") with a square size
    as the RANDOM_CROP op; None otherwise."""
    side = _square_size(t.size)
    fill = _fill(t.fill)
    if side is None or fill is None or t.padding_mode != "constant":
        return None
    padding = (0, 0, 0, 0) if t.padding is None else _padding4(t.padding)
    if padding is None:
        return None
    if any(v < 0 for v in padding):
        return None
    return _op(RANDOM_CROP, size=side, padding=_padding(padding), pad_if_needed=bool(t.pad_if_needed), fill=fill)


def _native_op(t, side=None):
    """t as the native op (a dict: see _op) of the C++ op with its semantics, or None when Joader runs it in Python
    (another class, interpolation or size form). `side`: the side of the square images t
    receives, when the ops before it fix one (the AutoAugment family's op spaces depend on it).
    Raises nothing: bad values are the native validation's to name."""
    name = type(t).__name__
    try:
        if name in AUTO_AUGMENT_FAMILIES:
            return _auto_augment_op(t, side)
        if name == "RandomCrop":
            return _random_crop_op(t)
        if name == "Pad":
            return _pad_op(t)
        if name in ("RandomAffine", "RandomRotation"):
            return _random_affine_op(t)
        random_apply = _random_apply_op(t)
    except (AttributeError, TypeError, ValueError):
        return None
    if random_apply is not None:
        return random_apply
    if name == "RandomResizedCrop":
        side, resample = _square_size(t.size), _resample(t)
        if side is None or resample is None:
            return None
        return _op("random_resized_crop", size=side, scale=_range(t.scale), ratio=_range(t.ratio),
                   interpolation=resample)
    if name == "RandomHorizontalFlip":
        return _op("random_horizontal_flip", p=float(t.p))
    if name == "ColorJitter":
        # torchvision keeps None for a property it does not adjust: absent here.
        return _op("color_jitter", **{prop: None if getattr(t, prop) is None else _range(getattr(t, prop))
                                      for prop in ("brightness", "contrast", "saturation", "hue")})
    if name == "Resize":
        size, resample = t.size, _resample(t)
        single = isinstance(size, int) or len(tuple(size)) == 1
        if not single or resample is None or getattr(t, "max_size", None) is not None:
            return None
        return _op("resize", size=_square_size(size), interpolation=resample)
    if name == "CenterCrop":
        side = _square_size(t.size)
        return None if side is None else _op("center_crop", size=side)
    return None


def describe(t):
    """A transform as a user reads it in an error: its repr when short, else its class name."""
    try:
        text = " ".join(repr(t).split())
    except Exception:
        text = ""
    name = type(t).__name__
    return text if text and len(text) <= 120 else name


def _fixed_size_prefix(ops):
    """The length of the longest prefix of ops that ends in one size for every image (its last
    sizing op a RandomResizedCrop, a CenterCrop or a RandomCrop); 0 if none."""
    best, fixed = 0, False
    for n, op in enumerate(ops, 1):
        sizing = _SIZING[op_kind(op)]
        if sizing != "keeps":
            fixed = sizing == "fixes"
        if fixed:
            best = n
    return best


@dataclass
class Plan:
    """How a pipeline runs per item: `native` ops first (C++, on the augmentation threads),
    then `python` transforms (in the job's worker processes, each image handed over as a PIL
    image), then `tail`, the tensor conversion fused into the batch's write (see _tensor_tail)
    or None. The native ops and the tail are exactly torchvision's; the rest is torchvision's (or
    the user's) own code."""
    native: list = field(default_factory=list)
    python: list = field(default_factory=list)
    tail: object = None
    native_names: list = field(default_factory=list)  # the torchvision class of each native op

    @property
    def augmenting(self):
        """Draws anything per item (so the job needs an augmentation seed)."""
        return bool(self.native or self.python or (self.tail and self.tail["erase"]))

    @property
    def resizing(self):
        """Gives every item one size (a dataset stored at its own size needs that for batches)."""
        return bool(self.native or self.python)

    def summary(self):
        """E.g. "native: RandomResizedCrop, RandomHorizontalFlip; Python: TrivialAugmentWide"."""
        native = list(self.native_names) + (["tensor tail"] if self.tail is not None else [])
        parts = []
        if native:
            parts.append("native: " + ", ".join(native))
        if self.python:
            parts.append("Python: " + ", ".join(type(t).__name__ for t in self.python))
        return "; ".join(parts)


def plan(augment, tensors=True):
    """The Plan of a pipeline (a transform, a list or a Compose, nested): the longest prefix that
    Joader runs natively and that ends in one size, then everything else in Python, except a
    tensor tail (ToTensor / PILToTensor + ConvertImageDtype, then Normalize, then RandomErasing)
    at the very end, which is fused into the batch's write. tensors=False (joader.Loader, which yields uint8 arrays)
    refuses tensor transforms. Raises JoaderError (INVALID_ARGUMENT) naming the problem."""
    if augment is None:
        return Plan()
    items = _items(augment)
    if not items:
        raise error(INVALID_ARGUMENT, "augment: the pipeline is empty; give augment=None for no augmentation")
    names = [type(t).__name__ for t in items]
    several = next((n for n in names if n in ("FiveCrop", "TenCrop")), None)
    if several:
        raise error(INVALID_ARGUMENT, f"augment: {several} gives several images per item; a batch holds one image per "
                                      "item (for test-time crops, evaluate each crop as its own pipeline)")
    first = next((i for i, n in enumerate(names) if n in ("ToTensor", "PILToTensor")), len(items))
    if not tensors and first < len(items):
        raise error(INVALID_ARGUMENT, f"augment: {names[first]}: joader.Loader yields uint8 arrays; a pipeline that "
                                      f"ends in tensors ({TENSOR_TAIL}) runs in joader.torch.DataLoader")
    if any(n in ("ConvertImageDtype", "Normalize") for n in names[:first]):
        raise error(INVALID_ARGUMENT, "augment: ConvertImageDtype and Normalize take tensors: put ToTensor() or "
                                      "PILToTensor() before them")
    native, side = [], None  # side: the square size the ops so far give every image, if any
    for t in items[:first]:
        op = _native_op(t, side)
        if op is None:
            break
        native.append(op)
        kind = op_kind(op)
        if _SIZING[kind] == "fixes":
            side = op[kind]["size"]
        elif _SIZING[kind] == "resizes":
            side = None
    native = native[:_fixed_size_prefix(native)]
    if native:
        _native.check_augment(native)
    rest = items[len(native):]
    tail = None
    if first < len(items):
        tail = _tensor_tail(items[first:])  # None: a tensor transform Joader does not fuse; all in Python
        if tail is not None:
            rest = items[len(native):first]
    return Plan(native, rest, tail, [type(t).__name__ for t in items[:len(native)]])


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
