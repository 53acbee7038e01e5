"""Small image data sets written by the tests themselves (Pillow, pickle, tarfile)."""

from __future__ import annotations

import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

CLASSES = ("cat", "dog", "frog")


@dataclass
class Folder:
    root: Path
    train: dict[str, np.ndarray]  # relative path under train/ -> H x W x 3 pixels written
    test: dict[str, np.ndarray]


def write_image(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)


def make_image_folder(
    root: Path,
    *,
    per_class: int = 4,
    per_class_test: int = 2,
    size: int = 12,
    suffix: str = ".png",
    eval_split: str = "test",
    seed: int = 0,
) -> Folder:
    """root/train/<class>/NN<suffix> and root/<eval_split>/<class>/NN<suffix>, random pixels."""
    rng = np.random.default_rng(seed)
    written: dict[str, dict[str, np.ndarray]] = {"train": {}, eval_split: {}}
    for split, count in (("train", per_class), (eval_split, per_class_test)):
        for name in CLASSES:
            for i in range(count):
                pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
                rel = f"{name}/{i:02d}{suffix}"
                write_image(root / split / rel, pixels)
                written[split][rel] = pixels
    return Folder(root, written["train"], written[eval_split])


def tar_folder(folder: Path, archive: Path, arcname: str | None = None) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=arcname or ".")
    return archive


@dataclass
class TinyCifar:
    train_x: np.ndarray  # N x 3 x 32 x 32
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def make_cifar_batches(folder: Path, *, per_batch: int = 4, seed: int = 0) -> TinyCifar:
    """The official python layout in miniature: data_batch_1..5, test_batch, batches.meta."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    xs, ys = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=per_batch).tolist()
        batch = {b"batch_label": name.encode(), b"labels": labels, b"data": data}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        xs.append(data.reshape(-1, 3, 32, 32))
        ys.append(np.asarray(labels))
    names = [
        c.encode()
        for c in [
            "airplane",
            "automobile",
            "bird",
            "cat",
            "deer",
            "dog",
            "frog",
            "horse",
            "ship",
            "truck",
        ]
    ]
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": names}, protocol=2))
    return TinyCifar(np.concatenate(xs[:5]), np.concatenate(ys[:5]), xs[5], ys[5])
