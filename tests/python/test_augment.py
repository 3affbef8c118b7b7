"""Per-job augmentation (src/prep/augment.h) against torchvision: the bytes of a resized crop, and
the law of RandomResizedCrop's parameters. The C++ ops are reached through joader._native's
testing hooks (joader._native.testing), without a daemon."""
import math
import re
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from scipy import stats

from joader import _native
from conftest import photo_imagefolder

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Real photos (every JPEG and PNG kind of make_photos.py) and the odd-image corpus."""
    root = tmp_path_factory.mktemp("augment")
    subprocess.run([sys.executable, os.path.join(DATA, "make_photos.py"), str(root / "photos"), "--count", "20",
                    "--min", "60", "--max", "640"], check=True, capture_output=True)
    subprocess.run([sys.executable, os.path.join(DATA, "make_corpus.py"), str(root / "corpus")], check=True)
    paths = sorted(str(p) for p in (root / "photos").rglob("*.*")) + sorted(
        str(p) for p in (root / "corpus" / "good").rglob("*.*"))
    return [Image.open(p).convert("RGB") for p in paths]


def torchvision_crop(pil, box, size, flip, interpolation=T.InterpolationMode.BILINEAR):
    out = F.resized_crop(pil, *box, [size, size], interpolation)
    if flip:
        out = F.hflip(out)
    return F.pil_to_tensor(out).permute(1, 2, 0).numpy()


@pytest.mark.parametrize("interpolation,code", [(T.InterpolationMode.BILINEAR, 2), (T.InterpolationMode.BICUBIC, 3),
                                                (T.InterpolationMode.NEAREST, 0)], ids=["bilinear", "bicubic", "nearest"])
def test_resized_crops_equal_torchvisions_bytes_on_real_photos(photos, interpolation, code):
    torch.manual_seed(0)
    checked = 0
    for n, pil in enumerate(photos):
        w, h = pil.size
        array = np.asarray(pil)
        boxes = [T.RandomResizedCrop.get_params(pil, (0.08, 1.0), (3 / 4, 4 / 3)) for _ in range(3)]
        boxes += [(0, 0, h, w), (h // 2, w // 3, 1, 1), (0, w - 1, h, 1)]  # whole, one pixel, a thin strip
        for k, box in enumerate(boxes):
            for size in (224, 17):  # mostly an enlargement, and a reduction with a wide filter
                flip = (n + k + size) % 2 == 1
                ours = _native.testing.resized_crop(array, *box, size, flip, code)
                expected = torchvision_crop(pil, box, size, flip, interpolation)
                assert np.array_equal(ours, expected), (n, pil.size, box, size, flip)
                checked += 1
    assert checked == 12 * len(photos) and len(photos) == 29


def draws_of_torchvision(width, height, scale, ratio, n):
    torch.manual_seed(0)
    image = torch.empty(3, height, width)
    out = np.empty((n, 5), dtype=np.int64)
    for k in range(n):
        out[k, :4] = T.RandomResizedCrop.get_params(image, scale, ratio)
        out[k, 4] = bool(torch.rand(1) < 0.5)
    return out


def law_pvalues(ours, theirs, width, height):
    """Two-sample KS p-values of area fraction, log aspect ratio and crop centre x, y; and the
    chi-square p-value of the flip counts."""
    def features(d):
        top, left, h, w = d[:, 0], d[:, 1], d[:, 2], d[:, 3]
        return {"area": h * w / (width * height), "log_aspect": np.log(w / h),
                "centre_x": (left + w / 2) / width, "centre_y": (top + h / 2) / height}
        # (left, top) are uniform given (w, h), so the centres test the position law.
    a, b = features(ours), features(theirs)
    p = {k: stats.ks_2samp(a[k], b[k]).pvalue for k in a}
    flips = [[ours[:, 4].sum(), len(ours) - ours[:, 4].sum()], [theirs[:, 4].sum(), len(theirs) - theirs[:, 4].sum()]]
    p["flip"] = stats.chi2_contingency(flips)[1]
    return p


# Five p-values per comparison, each against 1e-4: for a correct implementation the family-wise
# false-failure rate is at most 5e-4 (Bonferroni); the seeds are fixed, so a run either passes
# or fails the same way every time.
ALPHA = 1e-4
N = 6000


@pytest.mark.parametrize("width,height", [(500, 375), (200, 900)])
def test_random_resized_crop_parameters_follow_torchvisions_law(width, height):
    ours = _native.testing.draws(width, height, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 1, 0, N)
    theirs = draws_of_torchvision(width, height, (0.08, 1.0), (3 / 4, 4 / 3), N)
    p = law_pvalues(ours, theirs, width, height)
    assert min(p.values()) > ALPHA, p


def test_a_biased_law_is_rejected():
    # The control: scale (0.2, 1) instead of torchvision's (0.08, 1) must fail the same test.
    ours = _native.testing.draws(500, 375, 224, (0.2, 1.0), (3 / 4, 4 / 3), 0.5, 1, 0, N)
    theirs = draws_of_torchvision(500, 375, (0.08, 1.0), (3 / 4, 4 / 3), N)
    p = law_pvalues(ours, theirs, 500, 375)
    assert p["area"] < ALPHA, p
    biased_flip = _native.testing.draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.45, 1, 0, N)
    assert law_pvalues(biased_flip, theirs, 500, 375)["flip"] < 0.05  # a 5-point bias in p, 6000 draws


def test_draws_are_fixed_by_seed_epoch_and_item():
    a = _native.testing.draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 3, 200)
    assert np.array_equal(a, _native.testing.draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 3, 200))
    other_epoch = _native.testing.draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 4, 200)
    other_seed = _native.testing.draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 8, 3, 200)
    assert (a != other_epoch).any(axis=1).mean() > 0.95 and (a != other_seed).any(axis=1).mean() > 0.95
    assert math.isclose(a[:, 4].mean(), 0.5, abs_tol=0.15)


@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory):
    """An ImageFolder of real photos of several kinds and sizes (make_photos.py), in two classes."""
    return photo_imagefolder(tmp_path_factory.mktemp("tensor-tail"), 8, 40, 300)


@pytest.mark.parametrize("tail", [
    [T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))],
    [T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.25))],
    [T.ToTensor()],
    [T.PILToTensor()],
], ids=["totensor_normalize", "piltotensor_convert_normalize", "totensor", "piltotensor"])
def test_a_pipeline_ending_in_tensors_gives_the_batch_stacking_torchvisions_outputs_gives(client, photo_folder, tail):
    import torchvision
    import joader.torch
    pipeline = T.Compose([T.Resize(40), T.CenterCrop(32), *tail])
    reference = torchvision.datasets.ImageFolder(photo_folder, transform=pipeline)
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    loader = joader.torch.DataLoader("photos", batch_size=4, epochs=1, client=client, with_indices=True,
                                     augment=pipeline)
    checked = 0
    for images, labels, ids in loader:
        assert images.dtype == reference[0][0].dtype and images.shape[1:] == (3, 32, 32)
        for image, label, i in zip(images, labels.tolist(), ids.tolist()):
            expected, expected_label = reference[i]
            assert label == expected_label and torch.equal(image, expected), (i, (image - expected).abs().max())
            checked += 1
    assert checked == len(reference) > 0


@pytest.mark.parametrize("interpolation", [T.InterpolationMode.BICUBIC, T.InterpolationMode.NEAREST],
                         ids=["bicubic", "nearest"])
def test_a_resize_with_another_interpolation_runs_natively_with_torchvisions_bytes(client, photo_folder, interpolation):
    import torchvision
    import joader.torch
    from joader.augment import plan
    pipeline = T.Compose([T.Resize(40, interpolation=interpolation), T.CenterCrop(32), T.PILToTensor()])
    assert plan(pipeline).summary() == "native: Resize, CenterCrop, tensor tail"
    reference = torchvision.datasets.ImageFolder(photo_folder, transform=pipeline)
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    with joader.torch.DataLoader("photos", batch_size=4, epochs=1, client=client, with_indices=True,
                                 augment=pipeline) as loader:
        got = {i: image for images, _, ids in loader for image, i in zip(images, ids.tolist())}
    assert sorted(got) == list(range(len(reference)))
    for i, image in got.items():
        assert torch.equal(image, reference[i][0]), i


def test_a_tensor_tail_out_of_place_or_doubled_is_refused_naming_it(client, photo_folder):
    import joader
    import joader.torch
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    normalize = T.Normalize((0.5,) * 3, (0.2,) * 3)
    cases = [
        (dict(augment=T.Compose([T.RandomResizedCrop(32), normalize])), "put ToTensor() or PILToTensor() before"),
        (dict(augment=[T.RandomResizedCrop(32), T.ToTensor(), normalize], mean=(0.5, 0.5, 0.5)),
         "would normalise a second time"),
        (dict(augment=[T.RandomResizedCrop(32), T.PILToTensor()], dtype=torch.float32), "ConvertImageDtype"),
        (dict(augment=[T.RandomResizedCrop(32), T.ToTensor()], layout="NHWC"), "layout must be 'NCHW'"),
    ]
    for kwargs, message in cases:
        with pytest.raises((ValueError, joader.JoaderError), match=re.escape(message)):
            joader.torch.DataLoader("photos", batch_size=4, client=client, **kwargs)
    with pytest.raises(joader.JoaderError, match="runs in joader.torch.DataLoader"):
        joader.Loader("photos", batch_size=4, client=client, augment=[T.RandomResizedCrop(32), T.ToTensor()])
    ok = joader.torch.DataLoader("photos", batch_size=4, client=client, dtype=torch.float32,
                                 augment=[T.RandomResizedCrop(32), T.ToTensor(), normalize])
    assert next(iter(ok))[0].dtype == torch.float32, "dtype=torch.float32 agrees with the pipeline: accepted"
    ok.close()


ERASE = (0.5, 0.02, 0.33, 0.3, 3.3, (0.0, 0.0, 0.0))  # RandomErasing()'s defaults


def erasings_of_torchvision(width, height, p, scale, ratio, n):
    """(erase, top, left, height, width) as RandomErasing.forward draws them on a float image."""
    torch.manual_seed(0)
    image = torch.empty(3, height, width)
    out = np.zeros((n, 5), dtype=np.int64)
    for k in range(n):
        if torch.rand(1) < p:
            i, j, h, w, v = T.RandomErasing.get_params(image, scale, ratio, [0.0])
            if v is not image:
                out[k] = (1, i, j, h, w)
    return out


def erasing_pvalues(ours, theirs, width, height):
    """Chi-square p-value of the erase counts; KS p-values of area fraction, log aspect ratio and
    box centre x, y of the erased."""
    counts = [[ours[:, 0].sum(), len(ours) - ours[:, 0].sum()], [theirs[:, 0].sum(), len(theirs) - theirs[:, 0].sum()]]
    p = {"erase": stats.chi2_contingency(counts)[1]}

    def features(d):
        d = d[d[:, 0] == 1]
        top, left, h, w = d[:, 1], d[:, 2], d[:, 3], d[:, 4]
        return {"area": h * w / (width * height), "log_aspect": np.log(h / w), "centre_x": (left + w / 2) / width,
                "centre_y": (top + h / 2) / height}
    a, b = features(ours), features(theirs)
    p.update({k: stats.ks_2samp(a[k], b[k]).pvalue for k in a})
    return p


@pytest.mark.parametrize("width,height", [(224, 224), (60, 200)])
def test_random_erasing_boxes_follow_torchvisions_law(width, height):
    ours = _native.testing.erasing_boxes(width, height, ERASE, 1, N)
    theirs = erasings_of_torchvision(width, height, 0.5, (0.02, 0.33), (0.3, 3.3), N)
    p = erasing_pvalues(ours, theirs, width, height)
    assert min(p.values()) > ALPHA, p


def test_a_biased_erasing_law_is_rejected():
    # The control: scale (0.05, 0.33) instead of (0.02, 0.33), and p 0.45 instead of 0.5.
    theirs = erasings_of_torchvision(224, 224, 0.5, (0.02, 0.33), (0.3, 3.3), N)
    wider = _native.testing.erasing_boxes(224, 224, (0.5, 0.05, 0.33, 0.3, 3.3, (0.0,) * 3), 1, N)
    assert erasing_pvalues(wider, theirs, 224, 224)["area"] < ALPHA
    rarer = _native.testing.erasing_boxes(224, 224, (0.45, 0.02, 0.33, 0.3, 3.3, (0.0,) * 3), 1, N)
    assert erasing_pvalues(rarer, theirs, 224, 224)["erase"] < 0.05  # a 5-point bias in p, 6000 draws


@pytest.mark.parametrize("value", [0, (0.5, -1.0, 2.0), "random"], ids=["zero", "per_channel", "random"])
def test_a_final_random_erasing_fills_one_box_of_the_converted_batch(client, photo_folder, value):
    import joader.torch
    from joader.augment import plan
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    head = [T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    fused = plan(head + [T.RandomErasing(value=value)])
    assert fused.python == [] and fused.tail["erase"] is not None, "a final RandomErasing is fused, not in Python"
    plain = torchvision.datasets.ImageFolder(photo_folder, transform=T.Compose(head))
    loader = joader.torch.DataLoader("photos", batch_size=4, epochs=1, client=client, with_indices=True,
                                     augment=head + [T.RandomErasing(p=1.0, value=value)], augment_seed=3)
    boxes = set()
    for images, _, ids in loader:
        for image, i in zip(images, ids.tolist()):
            expected = plain[i][0]
            changed = (image != expected).any(dim=0)
            rows, cols = changed.any(dim=1).nonzero().flatten(), changed.any(dim=0).nonzero().flatten()
            top, left = int(rows.min()), int(cols.min())
            h, w = int(rows.max()) - top + 1, int(cols.max()) - left + 1
            assert h < 32 and w < 32, "torchvision keeps boxes smaller than the image"
            inside = torch.zeros_like(changed)
            inside[top:top + h, left:left + w] = True
            assert torch.equal(image[:, ~inside], expected[:, ~inside]), "only the box changes"
            box = image[:, top:top + h, left:left + w]
            if value == "random":
                assert box.std() > 0.5 and abs(float(box.mean())) < 1.0
            else:
                fill = torch.tensor([float(value)] * 3 if value == 0 else value).view(3, 1, 1)
                assert torch.equal(box, fill.expand_as(box))
            boxes.add((top, left, h, w))
    assert len(boxes) > len(plain) // 2, "boxes are drawn per item"


ADJUST = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast, "saturation": F.adjust_saturation,
          "hue": F.adjust_hue}


@pytest.mark.parametrize("which,factors", [
    ("brightness", [0.0, 0.6, 0.999, 1.0, 1.23, 1.4, 2.5]),
    ("contrast", [0.0, 0.6, 0.83, 1.0, 1.4, 3.0]),
    ("saturation", [0.0, 0.6, 1.0, 1.17, 1.4, 4.0]),
    ("hue", [-0.5, -0.1, -0.0371, 0.0, 0.05, 0.1, 0.4999, 0.5]),
])
def test_colour_adjustments_equal_torchvisions_bytes_on_real_photos(photos, which, factors):
    for n, pil in enumerate(photos):
        array = np.asarray(pil)
        for factor in factors:
            ours = _native.testing.adjust(array, which, factor)
            theirs = np.asarray(ADJUST[which](pil, factor))
            assert np.array_equal(ours, theirs), (n, pil.size, which, factor, np.abs(ours.astype(int) - theirs).max())


def test_the_hue_shift_equals_pils_for_every_rgb_colour():
    every = np.arange(1 << 24, dtype=np.uint32)
    colours = np.stack([every >> 16, (every >> 8) & 255, every & 255], axis=-1).astype(np.uint8).reshape(4096, 4096, 3)
    pil = Image.fromarray(colours)
    for factor in (-0.5, -0.2, 0.0, 0.013, 0.3):
        assert np.array_equal(_native.testing.adjust(colours, "hue", factor), np.asarray(F.adjust_hue(pil, factor))), \
            factor


JITTER = T.ColorJitter(0.4, 0.3, 0.5, 0.1)
JITTER_BOUNDS = (0.6, 1.4, 0.7, 1.3, 0.5, 1.5, -0.1, 0.1)


def jitter_draws_of_torchvision(n):
    torch.manual_seed(0)
    out = np.empty((n, 8))
    for k in range(n):
        order, *factors = T.ColorJitter.get_params(JITTER.brightness, JITTER.contrast, JITTER.saturation, JITTER.hue)
        out[k, :4], out[k, 4:] = order.tolist(), factors
    return out


def jitter_pvalues(ours, theirs):
    """Chi-square p-value of the 24 orders; KS p-values of the four factors."""
    def orders(d):
        codes = d[:, 0] * 64 + d[:, 1] * 16 + d[:, 2] * 4 + d[:, 3]
        return {c: int((codes == c).sum()) for c in np.unique(codes)}
    a, b = orders(ours), orders(theirs)
    cells = sorted(set(a) | set(b))
    p = {"order": stats.chi2_contingency([[a.get(c, 0) for c in cells], [b.get(c, 0) for c in cells]])[1]}
    for k, name in enumerate(("brightness", "contrast", "saturation", "hue")):
        p[name] = stats.ks_2samp(ours[:, 4 + k], theirs[:, 4 + k]).pvalue
    return p


def test_color_jitter_draws_follow_torchvisions_law():
    ours = _native.testing.jitter_draws(JITTER_BOUNDS, 1, 0, N)
    p = jitter_pvalues(ours, jitter_draws_of_torchvision(N))
    assert min(p.values()) > ALPHA, p
    assert sorted(set(map(tuple, ours[:, :4].astype(int).tolist()))) == sorted(
        __import__("itertools").permutations(range(4))), "every order is drawn"


def test_a_biased_jitter_law_is_rejected():
    theirs = jitter_draws_of_torchvision(N)
    biased = _native.testing.jitter_draws((0.6, 1.5, 0.7, 1.3, 0.5, 1.5, -0.1, 0.1), 1, 0, N)  # brightness to 1.5
    assert jitter_pvalues(biased, theirs)["brightness"] < ALPHA


def test_a_native_color_jitter_gives_torchvisions_bytes_for_its_draws(client, photo_folder):
    import joader.torch
    from joader.augment import plan
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    head = [T.Resize(40), T.CenterCrop(32)]
    assert len(plan(head + [JITTER]).native) == 3, "ColorJitter after a fixed size runs natively"
    plain = torchvision.datasets.ImageFolder(photo_folder, transform=T.Compose(head))
    loader = joader.torch.DataLoader("photos", batch_size=4, epochs=2, client=client, with_indices=True,
                                     augment=head + [JITTER, T.PILToTensor()], augment_seed=9)
    checked = 0
    for epoch in range(2):
        for images, _, ids in loader:
            for image, i in zip(images, ids.tolist()):
                draw = _native.testing.jitter_draws(JITTER_BOUNDS, 9, epoch, i + 1)[i]  # items 0..i: row i
                img = plain[i][0]
                for k in draw[:4].astype(int):
                    img = ADJUST[("brightness", "contrast", "saturation", "hue")[k]](img, draw[4 + k])
                assert torch.equal(image, F.pil_to_tensor(img)), (epoch, i)
                checked += 1
    assert checked == 2 * len(plain)


def test_the_python_mapping_the_native_op_table_and_the_protocol_list_the_same_ops():
    # An op is added in four places (its file in src/prep/ops/, the table's list, its message in the
    # protocol's AugmentOp, the Python mapping): all four must name the same ops in the same order.
    import joader.augment as A
    proto = open(os.path.join(os.path.dirname(__file__), "..", "..", "proto", "joader.proto")).read()
    oneof = re.search(r"message AugmentOp \{.*?oneof op \{(.*?)\}", proto, re.S).group(1)
    protocol = re.findall(r"(\w+) (\w+) = \d+;", oneof)  # (message, field)
    table = _native.op_families()  # (class, field, sizing)
    assert [(message, field) for message, field in protocol] == [(name, field) for name, field, _ in table]
    for message, field in protocol:
        assert field == re.sub(r"(?<!^)(?=[A-Z])", "_", message).lower(), "the field is the message's name"
        assert re.search(rf"message {message} \{{", proto), f"the protocol defines AugmentOp.{message}"
    assert {A.AUTO_AUGMENT, A.RANDOM_AFFINE, A.RANDOM_CROP} <= {field for _, field in protocol}
    image_ops = re.search(r"enum ImageOp \{(.*?)\}", proto, re.S).group(1)
    assert [A._wire_name(name) for name in A.IMAGE_OPS] == re.findall(r"(\w+) = \d+;", image_ops), \
        "joader.augment.IMAGE_OPS in the protocol's order"
    sizing = {name: how for name, _, how in table}
    assert sizing["Resize"] == "resizes" and sizing["CenterCrop"] == "fixes"


def test_a_non_finite_or_negative_value_is_refused_naming_the_transform_and_field():
    import joader
    from joader.augment import plan
    with pytest.raises(joader.JoaderError, match=re.escape("ColorJitter: brightness (0, inf) must be a range")):
        plan([T.RandomResizedCrop(8), T.ColorJitter(brightness=(0, float("inf")))])
    with pytest.raises(joader.JoaderError, match=re.escape("RandomHorizontalFlip: p must be in [0, 1], not nan")):
        plan([T.RandomResizedCrop(8), T.RandomHorizontalFlip(p=float("nan"))])
    with pytest.raises(joader.JoaderError, match=r"random_crop\.size.*-3"):
        plan([T.RandomCrop(-3)])


@pytest.mark.parametrize("padding,fill", [(3, 0), ((1, 2), 7), ((4, 0, 2, 5), (10, 200, 30)), ([0], 255)])
def test_pad_runs_natively_with_torchvisions_pixels(photos, padding, fill):
    # Pad, added as the op table says an op is added (src/prep/ops/pad.cc, its line in list.h, the
    # protocol's AugmentOp.Pad, joader.augment's mapping): the same bytes as torchvision's on PIL images.
    from joader.augment import plan
    for n, pil in enumerate(photos[:8]):
        side = min(pil.size) + 2
        pipeline = [T.Pad(padding, fill=fill), T.CenterCrop(side)]
        native = plan(pipeline, tensors=False)
        assert native.native_names == ["Pad", "CenterCrop"] and not native.python
        ours = _native.testing.augment(np.asarray(pil), native.native, 1, 0, n)
        assert np.array_equal(ours, np.asarray(T.Compose(pipeline)(pil))), (n, pil.size)
    assert plan([T.Pad(2, padding_mode="edge"), T.CenterCrop(8)], tensors=False).python, "other modes run in Python"


def test_pad_runs_in_python_where_the_native_op_would_differ_from_torchvisions():
    from joader.augment import plan
    crop = T.CenterCrop(8)
    for pad, why in ((T.Pad(-1), "a negative padding crops"), (T.Pad(9000), "above the native 8192"),
                     (T.Pad((2.0, 3)), "torchvision's PIL path refuses float padding"),
                     (T.Pad(2, padding_mode="reflect"), "another mode")):
        assert plan([pad, crop], tensors=False).native == [], why
    after = plan([T.CenterCrop(8), T.Pad(2)], tensors=False)
    assert after.native_names == ["CenterCrop"] and [type(t).__name__ for t in after.python] == ["Pad"], \
        "a Pad after the last fixed-size op leaves no one size: it runs in Python"
    with pytest.raises(RuntimeError, match=r"Pad: a 1×1 image would become 16385×16385 pixels, more than the limit"):
        _native.testing.augment(np.zeros((1, 1, 3), np.uint8), plan([T.Pad(8192), T.CenterCrop(8)],
                                                                     tensors=False).native, 0, 0, 0)
