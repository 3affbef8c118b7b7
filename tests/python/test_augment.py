"""Per-job augmentation (src/prep/augment.h) against torchvision: the bytes of a resized crop, and
the law of RandomResizedCrop's parameters. The C++ ops are reached through joader._native's
testing_* hooks, without a daemon."""
import math
import re
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from scipy import stats

from joader import _native

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


def torchvision_crop(pil, box, size, flip):
    out = F.resized_crop(pil, *box, [size, size], T.InterpolationMode.BILINEAR)
    if flip:
        out = F.hflip(out)
    return F.pil_to_tensor(out).permute(1, 2, 0).numpy()


def test_resized_crops_equal_torchvisions_bytes_on_real_photos(photos):
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
                ours = _native.testing_resized_crop(array, *box, size, flip)
                assert np.array_equal(ours, torchvision_crop(pil, box, size, flip)), (n, pil.size, box, size, flip)
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
    ours = _native.testing_draws(width, height, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 1, 0, N)
    theirs = draws_of_torchvision(width, height, (0.08, 1.0), (3 / 4, 4 / 3), N)
    p = law_pvalues(ours, theirs, width, height)
    assert min(p.values()) > ALPHA, p


def test_a_biased_law_is_rejected():
    # The control: scale (0.2, 1) instead of torchvision's (0.08, 1) must fail the same test.
    ours = _native.testing_draws(500, 375, 224, (0.2, 1.0), (3 / 4, 4 / 3), 0.5, 1, 0, N)
    theirs = draws_of_torchvision(500, 375, (0.08, 1.0), (3 / 4, 4 / 3), N)
    p = law_pvalues(ours, theirs, 500, 375)
    assert p["area"] < ALPHA, p
    biased_flip = _native.testing_draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.45, 1, 0, N)
    assert law_pvalues(biased_flip, theirs, 500, 375)["flip"] < 0.05  # a 5-point bias in p, 6000 draws


def test_draws_are_fixed_by_seed_epoch_and_item():
    a = _native.testing_draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 3, 200)
    assert np.array_equal(a, _native.testing_draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 3, 200))
    other_epoch = _native.testing_draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 7, 4, 200)
    other_seed = _native.testing_draws(500, 375, 224, (0.08, 1.0), (3 / 4, 4 / 3), 0.5, 8, 3, 200)
    assert (a != other_epoch).any(axis=1).mean() > 0.95 and (a != other_seed).any(axis=1).mean() > 0.95
    assert math.isclose(a[:, 4].mean(), 0.5, abs_tol=0.15)


@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory):
    """An ImageFolder of real photos of several kinds and sizes (make_photos.py), in two classes."""
    root = tmp_path_factory.mktemp("tensor-tail")
    subprocess.run([sys.executable, os.path.join(DATA, "make_photos.py"), str(root / "made"), "--count", "8",
                    "--min", "40", "--max", "300"], check=True, capture_output=True)
    for n, p in enumerate(sorted(p for p in (root / "made").rglob("*.*") if p.is_file())):
        target = root / "folder" / f"class{n % 2}"
        target.mkdir(parents=True, exist_ok=True)
        os.replace(p, target / f"{n:02d}{p.suffix}")
    return str(root / "folder")


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
