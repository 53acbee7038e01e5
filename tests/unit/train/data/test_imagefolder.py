"""The ImageFolder loader on small folders the tests write: decoding, cache, batches, errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from spotrun.core.errors import UsageError
from spotrun.recipes import Recipe, get_recipe
from spotrun.train.data.augment import ImagePipeline
from spotrun.train.data.batches import ImageBatches, Sharding
from spotrun.train.data.imagefolder import (
    DecodePlan,
    ImageList,
    cache_paths,
    decode_all,
    decoded_split,
    folder_key,
)
from spotrun.train.data.loading import load_data
from spotrun.train.data.source import SplitIndex, index_split, split_dirs
from tests.unit.train.data.images import CLASSES, make_image_folder, tar_folder, write_image


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def recipe(data: Path | str, *more: str) -> Recipe:
    return get_recipe(
        "digits-fast",
        [f"data={data}", "num_classes=3", "batch_size=4", "data_workers=0", *more],
    )


def listing(index: SplitIndex) -> ImageList:
    return ImageList([index.path(i) for i in range(len(index))], index.labels, index.classes)


def test_decoded_pixels_labels_and_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=3, size=10)
    index = index_split(split_dirs(folder.root)[0])
    plan = DecodePlan()
    cache = tmp_path / "cache"
    key = folder_key(index, plan)
    first = decoded_split(key, lambda: listing(index), plan, cache_dir=cache, workers=0, what="t")
    assert first.images.shape == (9, 3, 10, 10) and first.images.dtype == np.uint8
    for i, rel in enumerate(index.files):  # PNG is lossless: exactly the pixels written
        assert np.array_equal(first.images[i], folder.train[rel].transpose(2, 0, 1))
    assert first.labels.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2] and first.classes == CLASSES
    assert all(p.exists() for p in cache_paths(cache, key))
    capsys.readouterr()

    def must_not_list() -> ImageList:
        raise AssertionError("a cache hit must not list or decode the images")

    again = decoded_split(key, must_not_list, plan, cache_dir=cache, workers=0, what="t")
    assert "from the cache" in capsys.readouterr().out
    assert np.array_equal(again.images, first.images) and again.mean == first.mean
    assert np.array_equal(again.labels, first.labels) and again.classes == CLASSES
    # change one image: the key changes, so the cache is rebuilt rather than served stale
    changed = folder.train["dog/01.png"].copy()
    changed[0, 0] = 255 - changed[0, 0]
    write_image(index.root / "dog/01.png", changed)
    os.utime(index.root / "dog/01.png", ns=(1, 1))
    new_key = folder_key(index, plan)
    assert new_key != key and folder_key(index, DecodePlan(8)) != new_key
    rebuilt = decoded_split(
        new_key, lambda: listing(index), plan, cache_dir=cache, workers=0, what="t"
    )
    assert np.array_equal(rebuilt.images[4], changed.transpose(2, 0, 1))


def test_worker_processes_decode_the_same(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=100, size=8, suffix=".jpg")
    refs = listing(index_split(split_dirs(folder.root)[0])).refs
    inline = decode_all(refs, DecodePlan(), workers=0, what="train")
    pooled = decode_all(refs, DecodePlan(), workers=2, what="train")
    assert np.array_equal(inline, pooled) and len(pooled) == 300  # two chunks, two workers
    resized = decode_all(refs, DecodePlan(12), workers=2, what="train")
    assert resized.shape == (300, 3, 12, 12)


def test_mixed_sizes_need_image_size(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", size=12).root
    write_image(folder / "train" / "cat" / "big.png", np.zeros((20, 30, 3), dtype=np.uint8))
    with pytest.raises(UsageError, match=r"big.png is 20x30.*--set image_size"):
        load_data(recipe(folder))
    train, test = load_data(recipe(folder, "image_size=16"))
    x, _ = next(iter(train.batches(0)))
    assert x.shape == (4, 3, 16, 16)
    assert next(iter(test.batches(0)))[0].shape == (4, 3, 16, 16)


def test_broken_image_is_named(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set").root
    (folder / "train" / "dog" / "01.png").write_bytes(b"not a png")
    with pytest.raises(UsageError, match=r"dog/01.png"):
        load_data(recipe(folder))


def test_load_data_batches(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=4, per_class_test=3).root
    train, test = load_data(recipe(folder, "augment.crop_padding=2", "augment.flip=true"))
    assert len(train) == 3 and len(test) == 3  # 12 train images in batches of 4; 9 test
    batches = list(train.batches(0))
    xs = torch.cat([x for x, _ in batches])
    assert xs.shape == (12, 3, 12, 12) and xs.dtype == torch.float32
    assert sorted(torch.cat([y for _, y in batches]).tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    assert abs(float(xs.mean())) < 0.5  # normalized with the set's own statistics
    # the order and augmentation of an epoch depend on (seed, epoch) and nothing else
    torch.manual_seed(5)
    again = list(train.batches(0))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(batches, again))
    tail = list(train.batches(0, start=1))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches[1:], tail)) and len(tail) == 2
    assert not torch.equal(batches[0][0], next(iter(train.batches(1)))[0])
    test_labels = torch.cat([y for _, y in test.batches(0)]).tolist()
    assert test_labels == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # evaluation: every image, in order


def test_ranks_split_the_epoch(tmp_path: Path) -> None:
    images = torch.arange(10, dtype=torch.uint8).view(10, 1, 1, 1).expand(10, 3, 4, 4).contiguous()
    labels = torch.arange(10)
    pipeline = ImagePipeline((0.0,) * 3, (1 / 255,) * 3)
    seen = []
    for rank in (0, 1):
        # a global batch of 4: 2 steps of the 10 images, each rank 2 images of every step
        source = ImageBatches(
            images, labels, 4, pipeline, train=True, sharding=Sharding(3, rank, 2)
        )
        assert len(source) == 2
        seen.append([y.tolist() for _, y in source.batches(4)])
    assert not set(sum(seen[0], [])) & set(sum(seen[1], [])) and len(seen[0]) == len(seen[1]) == 2
    one = ImageBatches(images, labels, 4, pipeline, train=True, sharding=Sharding(3, 0, 1))
    # rank 0's part then rank 1's is the one process's step, step by step
    assert [a + b for a, b in zip(*seen, strict=True)] == [y.tolist() for _, y in one.batches(4)]


def test_small_archive_is_decoded_in_memory(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=4, per_class_test=3)
    archive = tar_folder(tmp_path / "set", tmp_path / "pets.tar.gz", "pets")
    train, test = load_data(recipe(archive))
    assert "read pets.tar.gz" in capsys.readouterr().out
    assert not (home / "cache" / "unpacked").exists()  # nothing written but the decoded cache
    first = torch.cat([x for x, _ in test.batches(0)])
    train, test = load_data(recipe(archive))
    assert "from the cache" in capsys.readouterr().out
    assert torch.equal(first, torch.cat([x for x, _ in test.batches(0)]))
    # the same images as the unpacked folder gives, in the same order
    _, from_folder = load_data(recipe(folder.root))
    assert torch.equal(first, torch.cat([x for x, _ in from_folder.batches(0)]))


def test_archive_streamed_is_unpacked_once(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_image_folder(tmp_path / "set")
    archive = tar_folder(tmp_path / "set", tmp_path / "pets.tar.gz", "pets")
    load_data(recipe(archive, "image_cache=off", "image_size=8"))
    assert "unpacking" in capsys.readouterr().out
    unpacked = list((home / "cache" / "unpacked").iterdir())
    assert len(unpacked) == 1 and (unpacked[0] / "pets" / "train" / "cat" / "00.png").exists()
    load_data(recipe(archive, "image_cache=off", "image_size=8"))
    assert "unpacking" not in capsys.readouterr().out


def test_class_count_must_match_the_recipe(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set").root
    with pytest.raises(UsageError, match=r"has 3 classes .* num_classes=10.*--set num_classes=3"):
        load_data(get_recipe("digits-fast", [f"data={folder}", "batch_size=4"]))
    with pytest.raises(UsageError, match="fewer than one step's batch of 64"):
        load_data(recipe(folder, "batch_size=64"))


def test_streamed_images(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=4, size=20, suffix=".jpg").root
    write_image(folder / "train" / "cat" / "wide.jpg", np.full((20, 40, 3), 90, dtype=np.uint8))
    settings = ["image_cache=off", "image_size=8", "eval_image_size=12", "augment.flip=true"]
    train, test = load_data(recipe(folder, *settings))
    batches = list(train.batches(2))
    assert len(batches) == 3 and batches[0][0].shape == (4, 3, 8, 8)
    assert batches[0][0].dtype == torch.float32
    assert next(iter(test.batches(0)))[0].shape == (4, 3, 12, 12)
    workers, _ = load_data(recipe(folder, *settings, "data_workers=2"))
    for (a, ya), (b, yb) in zip(batches, workers.batches(2)):  # same crops whoever decodes
        assert torch.equal(a, b) and torch.equal(ya, yb)
    tail = list(workers.batches(2, start=2))
    assert len(tail) == 1 and torch.equal(tail[0][0], batches[2][0])
    with pytest.raises(UsageError, match="need image_size"):
        load_data(recipe(folder, "image_cache=off"))


@pytest.mark.parametrize("mode", ["image_cache=on", "image_cache=off"])
def test_loading_leaves_the_global_rng_alone(tmp_path: Path, mode: str) -> None:
    # The trainer seeds, loads data, then builds the model: a decode that drew from the global
    # RNG only on the first (uncached) run would give that run other initial weights.
    folder = make_image_folder(tmp_path / "set", size=8).root
    torch.manual_seed(0)
    before = torch.get_rng_state()
    train, test = load_data(recipe(folder, mode, "image_size=8", "data_workers=1"))
    list(train.batches(0))
    list(test.batches(0))
    assert torch.equal(torch.get_rng_state(), before)


def test_normalization_choices(tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "set", per_class=4).root
    _, plain = load_data(recipe(folder, "normalize=none"))
    x = torch.cat([x for x, _ in plain.batches(0)])
    assert float(x.min()) >= 0 and float(x.max()) <= 1 and float(x.max()) > 0.9
    _, imagenet = load_data(recipe(folder, "normalize=imagenet"))
    y = torch.cat([x for x, _ in imagenet.batches(0)])
    assert torch.allclose(y[:, 0], (x[:, 0] - 0.485) / 0.229, atol=1e-5)
