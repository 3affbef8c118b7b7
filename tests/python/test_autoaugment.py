"""The AutoAugment family natively (src/prep/autoaugment.h) against torchvision itself: every op of
_apply_op byte for byte on real photos, each policy's law (TrivialAugmentWide, RandAugment,
AutoAugment) against the draws of torchvision's own forward(), and whole pipelines through the
daemon equal to torchvision's ops for the draws Joader made."""
import collections
import copy
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
from torchvision.transforms import autoaugment as tv_autoaugment

from joader import _native
from joader.augment import AUTO_AUGMENT, IMAGE_OPS, op_kind, plan
from conftest import photo_imagefolder

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
NEAREST, BILINEAR = T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR
# Three p-values per law, each against 1e-4: for a correct implementation the family-wise false
# failure rate is at most 3e-4 (Bonferroni); seeds are fixed, so a run passes or fails the same
# way every time.
ALPHA = 1e-4
N = 6000


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Real photos of every JPEG and PNG kind of make_photos.py at their own sizes, and squares as
    the ops meet them after a crop."""
    root = tmp_path_factory.mktemp("autoaugment")
    subprocess.run([sys.executable, os.path.join(DATA, "make_photos.py"), str(root), "--count", "12", "--min", "40",
                    "--max", "400"], check=True, capture_output=True)
    images = [Image.open(p).convert("RGB") for p in sorted(root.rglob("*.*")) if p.is_file()]
    return [F.center_crop(F.resize(im, 64), 64) if n % 2 else im for n, im in enumerate(images)]


def magnitudes_to_try(name):
    """Every third magnitude of TrivialAugmentWide's space for the op (both signs when signed), plus
    RandAugment's size-dependent translations."""
    space = T.TrivialAugmentWide()._augmentation_space(31)
    if name not in space or space[name][0].ndim == 0:
        return [0.0]
    values = [float(m) for m in space[name][0].tolist()][::3]
    if name.startswith("Translate"):
        values += [float(m) for m in T.RandAugment()._augmentation_space(31, (64, 64))[name][0].tolist()][::5]
    return values + ([-v for v in values] if space[name][1] else [])


@pytest.mark.parametrize("interpolation", [NEAREST, BILINEAR], ids=["nearest", "bilinear"])
@pytest.mark.parametrize("fill", [None, [10, 200, 30]], ids=["black", "fill"])
def test_every_op_equals_torchvisions_apply_op_byte_for_byte_on_real_photos(photos, interpolation, fill):
    code = 0 if interpolation == NEAREST else 2
    checked = 0
    for name in IMAGE_OPS[:IMAGE_OPS.index("Grayscale")]:  # _apply_op's ops (the rest: SINGLE below)
        for magnitude in magnitudes_to_try(name):
            for n, pil in enumerate(photos):
                expected = np.asarray(tv_autoaugment._apply_op(pil, name, magnitude, interpolation, fill))
                ours = _native.testing.image_op(np.asarray(pil), IMAGE_OPS.index(name), magnitude, code,
                                                tuple(fill or (0, 0, 0)))
                assert ours.shape == expected.shape and np.array_equal(ours, expected), (name, magnitude, n, pil.size)
                checked += 1
    assert checked > 2500


def test_rotations_by_quarter_turns_and_odd_sizes_equal_pils():
    rng = np.random.default_rng(0)
    for w, h in ((7, 7), (6, 9), (1, 5), (33, 32)):
        array = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        pil = Image.fromarray(array)
        for angle in (90.0, -90.0, 180.0, 270.0, 45.0, -135.0, 0.0, 360.0):
            for interpolation, code in ((NEAREST, 0), (BILINEAR, 2)):
                expected = np.asarray(F.rotate(pil, angle, interpolation=interpolation))
                ours = _native.testing.image_op(array, IMAGE_OPS.index("Rotate"), angle, code, (0, 0, 0))
                assert np.array_equal(ours, expected), (w, h, angle, interpolation)


def native_op(transform, side=32):
    """The AUTO_AUGMENT op Joader plans for transform after a crop to side×side."""
    ops = plan([T.RandomResizedCrop(side), transform]).native
    assert len(ops) == 2 and op_kind(ops[1]) == AUTO_AUGMENT, "runs natively after a crop"
    return ops[1]


def torchvision_draws(transform, n, side=32):
    """The (op, magnitude) lists torchvision's own forward() applies to n images."""
    calls = []
    original = tv_autoaugment._apply_op

    def record(img, op_name, magnitude, interpolation, fill):
        calls[-1].append((IMAGE_OPS.index(op_name), float(magnitude)))
        return img

    img = Image.new("RGB", (side, side))
    torch.manual_seed(0)
    tv_autoaugment._apply_op = record
    try:
        for _ in range(n):
            calls.append([])
            transform(img)
    finally:
        tv_autoaugment._apply_op = original
    return calls


def joader_draws(op, n, seed=3):
    return [[(code, magnitude) for code, magnitude in d] for d in _native.testing.auto_augment_draws(op, seed, 0, n)]


def law_pvalues(ours, theirs):
    """Chi-square p-values (two-sample) of: which ops are applied (as a sequence per image), the
    magnitudes' absolute values, and their signs, among the ops that have magnitudes."""
    def chi2(a, b):
        a, b = collections.Counter(a), collections.Counter(b)
        cells = sorted(set(a) | set(b))
        if len(cells) < 2:
            return 1.0
        return stats.chi2_contingency([[a[c] for c in cells], [b[c] for c in cells]])[1]

    def features(draws):
        ops = [tuple(code for code, _ in d) for d in draws]
        mags = [(code, round(abs(m), 4)) for d in draws for code, m in d]
        signs = [(code, m > 0) for d in draws for code, m in d if m != 0 and IMAGE_OPS[code] != "Posterize"]
        return ops, mags, signs

    return [chi2(x, y) for x, y in zip(features(ours), features(theirs))]


POLICIES = {
    "trivialaugmentwide": lambda: T.TrivialAugmentWide(),
    "randaugment": lambda: T.RandAugment(num_ops=2, magnitude=9),
    "autoaugment_imagenet": lambda: T.AutoAugment(T.AutoAugmentPolicy.IMAGENET),
    "autoaugment_cifar10": lambda: T.AutoAugment(T.AutoAugmentPolicy.CIFAR10),
    "autoaugment_svhn": lambda: T.AutoAugment(T.AutoAugmentPolicy.SVHN),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_each_policys_draws_follow_torchvisions_law(name):
    transform = POLICIES[name]()
    ours, theirs = joader_draws(native_op(transform), N), torchvision_draws(transform, N)
    p = law_pvalues(ours, theirs)
    assert min(p) > ALPHA, p
    if not name.startswith("trivial"):  # (TrivialAugmentWide has ~800 values: not all drawn in N)
        assert {t for d in ours for t in d} == {t for d in theirs for t in d}, "the same (op, magnitude) values"


def test_a_biased_policy_law_is_rejected():
    """A TrivialAugmentWide whose op space lists Identity twice (1/8 instead of 1/14, as a wrong op
    count would give) fails the op-choice test; so does one that never negates."""
    transform = T.TrivialAugmentWide()
    op = native_op(transform)
    biased = copy.deepcopy(op)
    biased[AUTO_AUGMENT]["entries"].append({"op": "IDENTITY", "p": 1.0})
    theirs = torchvision_draws(transform, N)
    assert law_pvalues(joader_draws(biased, N), theirs)[0] < ALPHA
    unsigned = copy.deepcopy(op)
    for entry in unsigned[AUTO_AUGMENT]["entries"]:
        entry["is_signed"] = False
    assert law_pvalues(joader_draws(unsigned, N), theirs)[2] < ALPHA


def test_the_family_runs_natively_where_its_arguments_allow_and_in_python_otherwise():
    crop = T.RandomResizedCrop(32)
    assert "native: RandomResizedCrop, TrivialAugmentWide" in plan([crop, T.TrivialAugmentWide()]).summary()
    bicubic = plan([crop, T.RandAugment(interpolation=T.InterpolationMode.BICUBIC)])
    assert bicubic.summary() == "native: RandomResizedCrop; Python: RandAugment"
    assert plan([crop, T.AugMix()]).summary() == "native: RandomResizedCrop; Python: AugMix"
    # Without a crop before it the size is unknown (RandAugment's translations depend on it), and
    # a native prefix must end in one size: all in Python.
    assert plan([T.Resize(40), T.RandAugment(), T.CenterCrop(32)]).summary() == \
        "Python: Resize, RandAugment, CenterCrop"
    fill = native_op(T.TrivialAugmentWide(fill=[1, 2, 3]))
    assert fill[AUTO_AUGMENT]["fill"] == [1, 2, 3]


@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory):
    return photo_imagefolder(tmp_path_factory.mktemp("autoaugment-folder"), 8, 40, 300)


def deliveries(client, photo_folder, transform):
    """[Resize(40), CenterCrop(32), transform, PILToTensor()] through a DataLoader (augment_seed 9,
    two epochs): yields (the delivered tensor, the item's 32×32 PIL input, transform's native op,
    epoch, item) for every delivery, and checks that every item came in each epoch."""
    import joader.torch
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    head = [T.Resize(40), T.CenterCrop(32)]
    op = plan(head + [transform]).native[2]
    plain = torchvision.datasets.ImageFolder(photo_folder, transform=T.Compose(head))
    with joader.torch.DataLoader("photos", batch_size=4, epochs=2, client=client, with_indices=True,
                                 augment=head + [transform, T.PILToTensor()], augment_seed=9) as loader:
        for epoch in range(2):
            seen = []
            for images, _, ids in loader:
                for image, i in zip(images, ids.tolist()):
                    yield image, plain[i][0], op, epoch, i
                    seen.append(i)
            assert sorted(seen) == list(range(len(plain)))


@pytest.mark.parametrize("name", ["trivialaugmentwide", "randaugment", "autoaugment_imagenet"])
def test_a_dataloader_applies_the_policy_natively_with_torchvisions_pixels_for_its_draws(client, photo_folder, name):
    transform = POLICIES[name]()
    for image, img, op, epoch, i in deliveries(client, photo_folder, transform):
        assert op_kind(op) == AUTO_AUGMENT
        for code, magnitude in _native.testing.auto_augment_draws(op, 9, epoch, i + 1)[i]:
            img = tv_autoaugment._apply_op(img, IMAGE_OPS[code], magnitude, transform.interpolation, None)
        assert torch.equal(image, F.pil_to_tensor(img)), (epoch, i)


# torchvision's single random ops, natively as the RandomApply family: (transform, the functional
# it applies with probability p).
SINGLE = {
    "RandomPosterize": (lambda: T.RandomPosterize(3, p=0.4), lambda img: F.posterize(img, 3)),
    "RandomSolarize": (lambda: T.RandomSolarize(100.5, p=0.6), lambda img: F.solarize(img, 100.5)),
    "RandomAutocontrast": (lambda: T.RandomAutocontrast(p=0.3), F.autocontrast),
    "RandomEqualize": (lambda: T.RandomEqualize(p=0.7), F.equalize),
    "RandomAdjustSharpness": (lambda: T.RandomAdjustSharpness(2.0, p=0.5), lambda img: F.adjust_sharpness(img, 2.0)),
    "RandomInvert": (lambda: T.RandomInvert(p=0.2), F.invert),
    "RandomGrayscale": (lambda: T.RandomGrayscale(p=0.35), lambda img: F.rgb_to_grayscale(img, 3)),
    "RandomVerticalFlip": (lambda: T.RandomVerticalFlip(p=0.5), F.vflip),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_a_single_random_op_is_applied_with_probability_p_and_torchvisions_pixels(photos, name):
    make, functional = SINGLE[name]
    transform = make()
    op = native_op(transform)
    applied = sum(len(d) for d in joader_draws(op, N))
    # Binomial two-sided test of the rate of application against p, at ALPHA.
    assert stats.binomtest(applied, N, transform.p).pvalue > ALPHA, (applied, N, transform.p)
    assert stats.binomtest(sum(len(d) for d in joader_draws(op, N, seed=4)), N, min(1.0, transform.p + 0.05)
                           ).pvalue < ALPHA or transform.p > 0.9, "a rate off by 0.05 is told apart"
    (code, magnitude), = [d[0] for d in joader_draws(op, 50) if d][:1]
    for pil in photos:
        ours = _native.testing.image_op(np.asarray(pil), code, magnitude, 0, (0, 0, 0))
        assert np.array_equal(ours, np.asarray(functional(pil))), (name, pil.size)


def test_grayscale_with_three_channels_runs_natively_and_with_one_in_python():
    crop = T.CenterCrop(32)
    assert plan([crop, T.Grayscale(3)]).summary() == "native: CenterCrop, Grayscale"
    assert plan([crop, T.Grayscale(1)]).summary() == "native: CenterCrop; Python: Grayscale"


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    """CIFAR-like: real photos stored as 24×24 and 32×32 PNGs, in two classes."""
    def save(path, n, target):
        side = 24 if n % 3 == 0 else 32
        F.center_crop(F.resize(Image.open(path).convert("RGB"), side), side).save(target / f"{n:02d}.png")
    return photo_imagefolder(tmp_path_factory.mktemp("small-folder"), 8, 60, 200, save)


@pytest.mark.parametrize("kwargs", [dict(padding=4), dict(padding=(4, 6), fill=(200, 30, 90)),
                                    dict(padding=(1, 2, 3, 4), pad_if_needed=True)],
                         ids=["cifar", "two_sided_fill", "four_sided_pad_if_needed"])
def test_random_crop_gives_one_of_torchvisions_windows_at_a_uniform_position(client, small_folder, kwargs):
    import joader.torch
    client.add_dataset("small", source=f"imagefolder:{small_folder}")
    transform = T.RandomCrop(32, **kwargs)
    assert plan([transform]).summary() == "native: RandomCrop"
    plain = torchvision.datasets.ImageFolder(small_folder)
    positions = collections.Counter()
    checked = 0
    with joader.torch.DataLoader("small", batch_size=4, epochs=30, client=client, with_indices=True,
                                 augment=[transform, T.PILToTensor()], augment_seed=5) as loader:
        for epoch in range(30):
            for images, _, ids in loader:
                for image, i in zip(images, ids.tolist()):
                    img = plain[i][0]
                    padding = transform.padding
                    padded = F.pad(img, padding, transform.fill) if padding is not None else img
                    if transform.pad_if_needed and padded.size[0] < 32:
                        padded = F.pad(padded, [32 - padded.size[0], 0], transform.fill)
                    if transform.pad_if_needed and padded.size[1] < 32:
                        padded = F.pad(padded, [0, 32 - padded.size[1]], transform.fill)
                    w, h = padded.size
                    windows = [(top, left) for top in range(h - 31) for left in range(w - 31)
                               if torch.equal(image, F.pil_to_tensor(F.crop(padded, top, left, 32, 32)))]
                    assert windows, (epoch, i, "not a window of torchvision's padded image")
                    positions.update(windows)
                    checked += 1
    assert checked == 30 * len(plain)
    assert len(positions) > 10, "the window moves"


@pytest.mark.parametrize("width,height,kwargs", [(32, 32, dict(padding=4)), (20, 28, dict(padding=(1, 2, 3, 0),
                                                 pad_if_needed=True))], ids=["cifar", "pad_if_needed"])
def test_random_crop_windows_are_uniform_over_the_padded_image(width, height, kwargs):
    transform = T.RandomCrop(32, **kwargs)
    op = plan([transform]).native[0]
    draws = _native.testing.random_crop_draws(op, width, height, 3, N)
    img = F.pad(Image.new("RGB", (width, height)), transform.padding)
    w, h = img.size
    if w < 32:
        w += 2 * (32 - w)
    if h < 32:
        h += 2 * (32 - h)
    cells = collections.Counter(map(tuple, draws.tolist()))
    assert set(cells) <= {(top, left) for top in range(h - 31) for left in range(w - 31)}
    counts = [cells[(top, left)] for top in range(h - 31) for left in range(w - 31)]
    assert stats.chisquare(counts).pvalue > ALPHA, "uniform over every window of the padded image"
    shifted = [cells[(top, left)] for top in range(h - 31) for left in range(w - 31) if left > 0]
    assert len(counts) == 1 or stats.chisquare(shifted + [0] * (len(counts) - len(shifted))).pvalue < ALPHA, \
        "a law that never picks the first column is told apart"


def test_a_random_crop_that_cannot_fit_the_smallest_image_is_refused_naming_it(client, small_folder):
    import joader.torch
    from joader import JoaderError
    client.add_dataset("small", source=f"imagefolder:{small_folder}")
    with pytest.raises(JoaderError, match=r"RandomCrop: size 32 is larger than the 24×24 image"):
        with joader.torch.DataLoader("small", batch_size=4, client=client, augment=[T.RandomCrop(32)]) as loader:
            next(iter(loader))


AFFINES = {
    "affine": lambda: T.RandomAffine(degrees=(-20, 30), translate=(0.1, 0.2), scale=(0.8, 1.2),
                                     shear=(-10, 10, -5, 5)),
    "affine_bilinear_fill_center": lambda: T.RandomAffine(15, shear=8, interpolation=BILINEAR, fill=(9, 90, 200),
                                                          center=(5, 7)),
    "rotation": lambda: T.RandomRotation(40),
    "rotation_bilinear_center": lambda: T.RandomRotation((-90, 90), interpolation=BILINEAR, center=(3, 20)),
}


def affine_draws_of_torchvision(transform, width, height, n):
    torch.manual_seed(0)
    out = np.zeros((n, 6))
    for k in range(n):
        if isinstance(transform, T.RandomRotation):
            out[k] = (T.RandomRotation.get_params(transform.degrees), 0, 0, 1, 0, 0)
        else:
            angle, (tx, ty), scale, (sx, sy) = T.RandomAffine.get_params(
                transform.degrees, transform.translate, transform.scale, transform.shear, [width, height])
            out[k] = (angle, tx, ty, scale, sx, sy)
    return out


def affine_pvalues(ours, theirs):
    """KS p-values of the angle, scale and shears; chi-square p-values of the translations."""
    p = []
    for k in (0, 3, 4, 5):
        p.append(1.0 if np.all(ours[:, k] == ours[0, k]) and np.all(theirs[:, k] == ours[0, k])
                 else stats.ks_2samp(ours[:, k], theirs[:, k]).pvalue)
    for k in (1, 2):
        a, b = collections.Counter(ours[:, k].tolist()), collections.Counter(theirs[:, k].tolist())
        cells = sorted(set(a) | set(b))
        p.append(1.0 if len(cells) < 2 else stats.chi2_contingency([[a[c] for c in cells], [b[c] for c in cells]])[1])
    return p


@pytest.mark.parametrize("name", sorted(AFFINES))
def test_random_affine_and_rotation_draws_follow_torchvisions_law(name):
    transform = AFFINES[name]()
    op = plan([transform, T.CenterCrop(8)]).native[0]
    ours = _native.testing.affine_draws(op, 40, 30, 3, 0, N)
    p = affine_pvalues(ours, affine_draws_of_torchvision(transform, 40, 30, N))
    assert min(p) > ALPHA, p


def test_a_biased_affine_law_is_rejected():
    theirs = affine_draws_of_torchvision(AFFINES["affine"](), 40, 30, N)
    biased = T.RandomAffine(degrees=(-20, 35), translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-10, 10, -5, 5))
    ours = _native.testing.affine_draws(plan([biased, T.CenterCrop(8)]).native[0], 40, 30, 3, 0, N)
    assert affine_pvalues(ours, theirs)[0] < ALPHA
    narrower = T.RandomAffine(degrees=(-20, 30), translate=(0.1, 0.15), scale=(0.8, 1.2), shear=(-10, 10, -5, 5))
    ours = _native.testing.affine_draws(plan([narrower, T.CenterCrop(8)]).native[0], 40, 30, 3, 0, N)
    assert affine_pvalues(ours, theirs)[5] < ALPHA


def test_rotations_that_expand_run_in_python():
    assert plan([T.CenterCrop(8), T.RandomRotation(10, expand=True)]).summary() == \
        "native: CenterCrop; Python: RandomRotation"


@pytest.mark.parametrize("name", sorted(AFFINES))
def test_a_dataloader_applies_random_affine_natively_with_torchvisions_pixels(client, photo_folder, name):
    transform = AFFINES[name]()
    for image, img, op, epoch, i in deliveries(client, photo_folder, transform):
        angle, tx, ty, scale, sx, sy = _native.testing.affine_draws(op, 32, 32, 9, epoch, i + 1)[i]
        if isinstance(transform, T.RandomRotation):
            expected = F.rotate(img, angle, transform.interpolation, False, transform.center, transform.fill)
        else:
            expected = F.affine(img, angle, [int(tx), int(ty)], scale, [sx, sy], transform.interpolation,
                                transform.fill, transform.center)
        assert torch.equal(image, F.pil_to_tensor(expected)), (name, epoch, i, angle)
