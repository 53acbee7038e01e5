"""The official CIFAR-10 python format, read from a tiny folder and archive the test writes."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.train.data.cifar import read_cifar10
from spotrun.train.data.loading import load_data
from tests.unit.train.data.images import make_cifar_batches, tar_folder


def test_folder_and_archive_read_the_same(tmp_path: Path) -> None:
    tiny = make_cifar_batches(tmp_path / "cifar-10-batches-py", per_batch=3)
    archive = tar_folder(
        tmp_path / "cifar-10-batches-py", tmp_path / "c.tar.gz", "cifar-10-batches-py"
    )
    for source in (tmp_path / "cifar-10-batches-py", archive):
        got = read_cifar10(source)
        assert got.train_images.shape == (15, 3, 32, 32) and got.train_images.dtype == np.uint8
        assert np.array_equal(got.train_images, tiny.train_x)
        assert np.array_equal(got.train_labels, tiny.train_y)
        assert np.array_equal(got.test_images, tiny.test_x) and got.classes[0] == "airplane"


def test_row_layout_is_red_then_green_then_blue_planes(tmp_path: Path) -> None:
    make_cifar_batches(tmp_path / "c", per_batch=1)
    row = np.zeros(3072, dtype=np.uint8)
    row[:1024], row[1024:2048], row[2048:] = 10, 20, 30
    row[1024 + 32 * 5 + 7] = 99  # green, row 5, column 7
    batch = {b"labels": [4], b"data": row[None]}
    (tmp_path / "c" / "test_batch").write_bytes(pickle.dumps(batch, protocol=2))
    image = read_cifar10(tmp_path / "c").test_images[0]
    assert image[0].max() == 10 and image[2].min() == 30 and image[1, 5, 7] == 99


def test_a_tampered_batch_cannot_run_code(tmp_path: Path) -> None:
    make_cifar_batches(tmp_path / "c")

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("pwned",))

    (tmp_path / "c" / "data_batch_2").write_bytes(pickle.dumps({b"data": Evil()}, protocol=2))
    with pytest.raises(
        UsageError, match=r"data_batch_2 is not a CIFAR-10 python batch .*unexpected object .*print"
    ):
        read_cifar10(tmp_path / "c")


def test_wrong_shapes_are_named(tmp_path: Path) -> None:
    make_cifar_batches(tmp_path / "c")
    batch = {b"labels": [1], b"data": np.zeros((1, 100), dtype=np.uint8)}
    (tmp_path / "c" / "data_batch_1").write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(UsageError, match="data_batch_1 holds uint8 data of shape"):
        read_cifar10(tmp_path / "c")


def test_load_data_from_cifar_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    tiny = make_cifar_batches(tmp_path / "home" / "data" / "cifar-10-batches-py", per_batch=4)
    recipe = get_recipe(
        "digits-fast",
        [
            "data=cifar10",
            "batch_size=8",
            "eval_batch_size=3",
            "augment.translate=2",
            "eval_image_size=40",
        ],
    )
    train, test = load_data(recipe)
    assert len(train) == 2 and len(test) == 2
    x, y = next(iter(train.batches(0)))
    assert x.shape == (8, 3, 32, 32) and x.dtype == torch.float32
    tx, ty = next(iter(test.batches(0)))
    assert tx.shape == (3, 3, 40, 40) and ty.tolist() == tiny.test_y[:3].tolist()
