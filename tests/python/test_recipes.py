"""Whole training recipes as augment=: what Joader does not run natively runs per item in Python
worker processes (joader.pool), with torchvision's own code, seeded per (augment_seed, epoch,
item). Checked against torchvision itself on real photos."""
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T

import joader
import joader.torch
from joader.pool import item_seed, seed_everything
from conftest import photo_imagefolder

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory):
    """An ImageFolder of 18 real photos of several kinds and sizes (make_photos.py), in two classes."""
    return photo_imagefolder(tmp_path_factory.mktemp("recipes"), 18, 60, 320)


@pytest.fixture
def photos(client, photo_folder):
    client.add_dataset("photos", source=f"imagefolder:{photo_folder}")
    return torchvision.datasets.ImageFolder(photo_folder)


class AddNoise:
    """A user's own transform: a class with __call__(img), drawing from numpy's global generator."""

    def __call__(self, img):
        a = np.asarray(img).astype(np.int16) + np.random.randint(-20, 21, size=(1, 1, 3))
        from PIL import Image
        return Image.fromarray(a.clip(0, 255).astype(np.uint8))


def epoch_of(loader):
    """{item: image tensor} of one pass; asserts each item came once."""
    out = {}
    for images, labels, ids in loader:
        for image, i in zip(images, ids.tolist()):
            assert i not in out, f"item {i} delivered twice in one epoch"
            out[i] = image.clone()
    return out


def reference(dataset, pipeline, seed, epoch, item):
    """What torchvision gives for one item when seeded as Joader seeds the Python part."""
    img, _ = dataset[item]
    seed_everything(item_seed(seed, epoch, item))
    return pipeline(img.convert("RGB"))


# Native prefix Resize + CenterCrop (deterministic), then ops only Python runs, then the tail.
# (TrivialAugmentWide, RandAugment and AutoAugment with nearest or bilinear resampling run natively
# after a crop, tests/python/test_autoaugment.py; here bicubic, or a user's class before them,
# keeps them in Python.)
EXACT = {
    # RandomErasing before Normalize: not the fused tail, so torchvision's own runs in the pool.
    "trivialaugment_bicubic_erasing": lambda: [T.TrivialAugmentWide(interpolation=T.InterpolationMode.BICUBIC),
                                               T.PILToTensor(), T.ConvertImageDtype(torch.float),
                                               T.RandomErasing(0.5), T.Normalize(MEAN, STD)],
    "own_class_randaugment": lambda: [AddNoise(), T.RandAugment(), T.ToTensor(), T.Normalize(MEAN, STD)],
    "augmix": lambda: [T.AugMix(), T.PILToTensor()],
    # ColorJitter after a user's class: Python too (native ops are a prefix).
    "own_class_colorjitter": lambda: [AddNoise(), T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.ToTensor()],
    "own_class_bicubic_resize": lambda: [AddNoise(), T.RandomResizedCrop(40, interpolation=T.InterpolationMode.BICUBIC),
                                         T.RandomGrayscale(0.5), T.ToTensor(), T.Normalize(MEAN, STD)],
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_python_part_of_a_recipe_gives_torchvisions_tensors_for_the_same_seeds(client, photos, name):
    pipeline = T.Compose([T.Resize(48), T.CenterCrop(48), *EXACT[name]()])
    loader = joader.torch.DataLoader("photos", batch_size=5, epochs=2, client=client, augment=pipeline,
                                     augment_seed=11, with_indices=True, num_workers=2)
    for epoch in range(2):
        got = epoch_of(loader)
        assert sorted(got) == list(range(len(photos)))
        for item, image in got.items():
            expected = reference(photos, pipeline, 11, epoch, item)
            assert image.dtype == expected.dtype and torch.equal(image, expected), (name, epoch, item)
    loader.close()


def test_the_reference_recipe_runs_whole_with_one_normalisation_and_seeded_draws(client, photos):
    """torchvision's classification recipe (ta_wide, random erasing) as users write it."""
    recipe = T.Compose([T.RandomResizedCrop(56), T.RandomHorizontalFlip(0.5),
                        T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR), T.PILToTensor(),
                        T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD), T.RandomErasing(0.1)])

    def run(seed, workers):
        with joader.torch.DataLoader("photos", batch_size=4, epochs=1, client=client, augment=recipe,
                                     augment_seed=seed, with_indices=True, num_workers=workers) as loader:
            return epoch_of(loader)

    a, again, in_process, other = run(5, 2), run(5, 3), run(5, 0), run(6, 2)
    assert sorted(a) == list(range(len(photos)))
    image = next(iter(a.values()))
    assert image.shape == (3, 56, 56) and image.dtype == torch.float32
    assert all(torch.equal(a[i], again[i]) and torch.equal(a[i], in_process[i]) for i in a), \
        "the same seed gives the same tensors, whatever the number of workers"
    assert sum(not torch.equal(a[i], other[i]) for i in a) == len(a), "another seed draws other augmentations"
    stacked = torch.stack(list(a.values()))
    assert -2.2 < stacked.min() < -1.0 and 1.5 < stacked.max() < 2.7, "normalised once: ImageNet-normalised range"


class Boom:
    """Raises ValueError on the item whose seeded first draw of Python's random is `draw`."""

    def __init__(self, draw):
        self.draw = draw

    def __call__(self, img):
        import random
        if random.random() == self.draw:
            raise ValueError("bad item")
        return img


def test_a_transform_that_raises_ends_the_batch_naming_it_and_a_resume_gets_the_batch_again(client, photos):
    import random
    bad_item = 7
    seed_everything(item_seed(1, 0, bad_item))
    loader = joader.Loader("photos", batch_size=4, epochs=1, client=client, num_workers=2, augment_seed=1,
                           augment=[T.Resize(32), T.CenterCrop(32), Boom(random.random())])
    done = []
    with pytest.raises(joader.JoaderError) as e:
        for batch in loader:
            done += batch.indices.tolist()
    assert e.value.code == 15
    message = str(e.value)
    assert "Boom" in message and f"on item {bad_item} of epoch 0" in message and "ValueError: bad item" in message
    state = loader.state_dict()
    assert bad_item not in done and sorted(state["consumed"]) == sorted(done)
    rest = joader.Loader("photos", batch_size=4, epochs=1, client=client, num_workers=0, state=state,
                         augment=[T.Resize(32), T.CenterCrop(32), Boom(None)])
    again = [i for b in rest for i in b.indices.tolist()]
    assert sorted(done + again) == list(range(len(photos))), "nothing lost, nothing repeated"


def test_a_worker_that_dies_is_an_error_naming_it_not_a_hang(client, photos):
    class Dies:
        def __call__(self, img):
            os.kill(os.getpid(), signal.SIGKILL)

    loader = joader.Loader("photos", batch_size=4, epochs=1, client=client, num_workers=2,
                           augment=[T.CenterCrop(32), Dies()])
    with pytest.raises(joader.JoaderError, match=r"worker process \d \(pid \d+\) was killed by signal 9"):
        next(iter(loader))
    assert loader.state_dict()["consumed"] == []
    loader.close()


def test_outputs_of_different_sizes_are_refused_naming_two_items(client, photos):
    loader = joader.Loader("photos", batch_size=18, epochs=1, client=client, num_workers=0,
                           augment=[T.Resize(32)])
    with pytest.raises(joader.JoaderError, match=r"the pipeline's outputs differ: item \d+ gave a \d+×\d+ image \(3 channels, uint8\), item \d+ a "):
        next(iter(loader))


def test_break_and_continue_lose_nothing_while_batches_are_in_flight(client, photos):
    loader = joader.torch.DataLoader("photos", batch_size=3, epochs=3, client=client, num_workers=2,
                                     augment=[T.CenterCrop(32), AddNoise()], with_indices=True)
    for epoch in range(3):
        seen = []
        for _, _, ids in loader:
            seen += ids.tolist()
            if len(seen) == 6:
                break  # 2 batches taken; more are in the workers' hands
        if epoch == 0:
            [job] = client.status()["jobs"]
            assert job["augment"] == "CenterCrop(32); in Python: AddNoise", "status shows where each op runs"
        for _, _, ids in loader:  # the same epoch continues
            seen += ids.tolist()
        assert sorted(seen) == list(range(len(photos))), epoch
    loader.close()


def test_torch_dataloader_habits_are_meaningful_or_refused_with_the_reason(client, photos):
    aug = [T.CenterCrop(32), T.RandomInvert()]
    cases = [
        (dict(sampler=[1, 2]), "sampler=list is not supported by joader.torch.DataLoader: it takes DistributedSampler"),
        (dict(batch_sampler=[[1]]), "batch_sampler= is not supported"),
        (dict(collate_fn=list), "collate_fn= is not supported"),
        (dict(generator=torch.Generator()), "augment_seed= makes augmentation reproducible"),
        (dict(timeout=5), "timeout= is not supported: Joader does not hang silently"),
        (dict(num_workers=-1), "num_workers"),
    ]
    for kwargs, message in cases:
        with pytest.raises((ValueError, joader.JoaderError), match=re.escape(message)):
            joader.torch.DataLoader("photos", batch_size=4, client=client, augment=aug, **kwargs)
    calls = []
    loader = joader.torch.DataLoader("photos", batch_size=4, client=client, augment=aug, shuffle=True,
                                     pin_memory=True, persistent_workers=True, prefetch_factor=3, num_workers=2,
                                     worker_init_fn=calls.append, multiprocessing_context="spawn")
    images, _ = next(iter(loader))
    assert images.shape == (4, 3, 32, 32) and images.is_pinned() == torch.cuda.is_available()
    loader.close()


def test_worker_init_fn_runs_once_in_each_worker(client, photos, tmp_path):
    loader = joader.Loader("photos", batch_size=6, epochs=1, client=client, num_workers=2,
                           augment=[T.CenterCrop(32), AddNoise()], worker_init_fn=_touch(str(tmp_path)))
    assert sum(len(b.indices) for b in loader) == len(photos)
    assert sorted(os.listdir(tmp_path)) == ["worker0", "worker1"]


class _touch:
    def __init__(self, directory):
        self.directory = directory

    def __call__(self, worker_id):
        open(os.path.join(self.directory, f"worker{worker_id}"), "w").close()


def test_the_recipes_users_run_split_into_native_ops_python_ops_and_a_fused_tail():
    from joader.augment import plan
    tail = [T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD), T.RandomErasing(0.1)]
    head = [T.RandomResizedCrop(224), T.RandomHorizontalFlip(0.5)]
    cases = {
        "ta_wide": (head + [T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR)] + tail,
                    "native: RandomResizedCrop, RandomHorizontalFlip, TrivialAugmentWide, tensor tail"),
        "randaugment": (head + [T.RandAugment()] + tail,
                        "native: RandomResizedCrop, RandomHorizontalFlip, RandAugment, tensor tail"),
        "autoaugment": (head + [T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)] + tail,
                        "native: RandomResizedCrop, RandomHorizontalFlip, AutoAugment, tensor tail"),
        "augmix": (head + [T.AugMix()] + tail,
                   "native: RandomResizedCrop, RandomHorizontalFlip, tensor tail; Python: AugMix"),
        "timm": (head + [T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor(), T.Normalize(MEAN, STD)],
                 "native: RandomResizedCrop, RandomHorizontalFlip, ColorJitter, tensor tail"),
        "own_class": (head + [AddNoise(), T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor(), T.Normalize(MEAN, STD)],
                      "native: RandomResizedCrop, RandomHorizontalFlip, tensor tail; Python: AddNoise, ColorJitter"),
    }
    for name, (pipeline, summary) in cases.items():
        assert plan(T.Compose(pipeline)).summary() == summary, name


def test_timms_default_recipe_runs_natively_into_normalised_float_batches(client, photos):
    recipe = T.Compose([T.RandomResizedCrop(56), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4),
                        T.ToTensor(), T.Normalize(MEAN, STD)])
    with joader.torch.DataLoader("photos", batch_size=6, epochs=1, client=client, augment=recipe, augment_seed=2,
                                 with_indices=True) as loader:
        got = epoch_of(loader)
    assert sorted(got) == list(range(len(photos)))
    stacked = torch.stack(list(got.values()))
    assert stacked.shape == (len(photos), 3, 56, 56) and stacked.dtype == torch.float32
    assert -2.2 < stacked.min() < -1.0 and 1.5 < stacked.max() < 2.7, "normalised once"
