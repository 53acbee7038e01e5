"""The official CIFAR-10 python release: pickled batches of 10,000 32x32 images each.

Read from the unpacked folder (cifar-10-batches-py) or straight from cifar-10-python.tar.gz.
Each batch is a dict with b"data" (10000 x 3072 uint8: the red plane, then green, then blue,
each 32 rows of 32) and b"labels"; batches.meta names the classes. The unpickler accepts only
the few numpy names these files use, so a tampered file cannot run code.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spotrun.core.errors import UsageError
from spotrun.train.data.source import CIFAR_TEST_FILE, CIFAR_TRAIN_FILES

META_FILE = "batches.meta"
SIDE = 32
DEFAULT_CLASSES = (
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
)

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 carry bytes
}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR batch")
        return super().find_class(module, name)


@dataclass(frozen=True)
class CifarArrays:
    train_images: np.ndarray  # N x 3 x 32 x 32 uint8
    train_labels: np.ndarray  # N int64
    test_images: np.ndarray
    test_labels: np.ndarray
    classes: tuple[str, ...]


def _load(blob: bytes, name: str, source: Path) -> dict[bytes, Any]:
    try:
        value = _BatchUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise UsageError(f"{source}: {name} is not a CIFAR-10 python batch ({exc})") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{source}: {name} is not a CIFAR-10 python batch (not a dict)")
    return value


def _images_labels(
    batch: dict[bytes, Any], name: str, source: Path
) -> tuple[np.ndarray, np.ndarray]:
    data = batch.get(b"data")
    labels = batch.get(b"labels")
    if not isinstance(data, np.ndarray) or labels is None:
        raise UsageError(f"{source}: {name} lacks b'data' or b'labels'")
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * SIDE * SIDE:
        raise UsageError(
            f"{source}: {name} holds {data.dtype} data of shape {data.shape}, "
            f"expected uint8 rows of {3 * SIDE * SIDE} values"
        )
    y = np.asarray(labels, dtype=np.int64)
    if len(y) != len(data):
        raise UsageError(f"{source}: {name} has {len(data)} images but {len(y)} labels")
    return data.reshape(-1, 3, SIDE, SIDE), y


def _read_blobs(source: Path) -> dict[str, bytes]:
    wanted = {*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE, META_FILE}
    blobs: dict[str, bytes] = {}
    if source.is_dir():
        for name in wanted:
            if (source / name).is_file():
                blobs[name] = (source / name).read_bytes()
        return blobs
    try:
        with tarfile.open(source, "r|*") as tar:
            for member in tar:
                base = Path(member.name).name
                if member.isfile() and base in wanted:
                    handle = tar.extractfile(member)
                    if handle is not None:
                        blobs[base] = handle.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"cannot read {source} as a tar archive ({exc})") from exc
    return blobs


def read_cifar10(source: Path) -> CifarArrays:
    """The five training batches and the test batch, from a folder or a tar archive."""
    blobs = _read_blobs(source)
    missing = [n for n in (*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE) if n not in blobs]
    if missing:
        raise UsageError(
            f"{source} lacks CIFAR-10 batches: {', '.join(missing)}",
            hint="expected data_batch_1..5 and test_batch as in cifar-10-python.tar.gz",
        )
    parts = [_images_labels(_load(blobs[n], n, source), n, source) for n in CIFAR_TRAIN_FILES]
    test_x, test_y = _images_labels(
        _load(blobs[CIFAR_TEST_FILE], CIFAR_TEST_FILE, source), CIFAR_TEST_FILE, source
    )
    classes: tuple[str, ...] = DEFAULT_CLASSES
    if META_FILE in blobs:
        names = _load(blobs[META_FILE], META_FILE, source).get(b"label_names")
        if isinstance(names, list) and names:
            classes = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names)
    return CifarArrays(
        train_images=np.concatenate([x for x, _ in parts]),
        train_labels=np.concatenate([y for _, y in parts]),
        test_images=test_x,
        test_labels=test_y,
        classes=classes,
    )
