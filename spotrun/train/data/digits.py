"""The 8x8 handwritten digits set that scikit-learn ships (1,797 images, 10 classes).

Read straight from scikit-learn's package files, so nothing is downloaded and importing
scikit-learn (over a second) is not needed.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import torch

from spotrun.core.errors import UsageError

TEST_FRACTION = 0.2
SPLIT_SEED = 0  # the split is fixed for every run, so accuracies compare across runs


def _digits_csv() -> Path:
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "the digits data set comes with scikit-learn, which is not installed",
            hint="pip install scikit-learn",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.exists():
        raise UsageError(f"scikit-learn's digits file is missing at {path}")
    return path


def load_digits_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train_x, train_y, test_x, test_y): N x 1 x 8 x 8 inputs in [0, 1], stratified split."""
    with gzip.open(_digits_csv(), "rt") as fh:
        table = np.loadtxt(fh, delimiter=",", dtype=np.float32)
    images = table[:, :-1].reshape(-1, 1, 8, 8) / 16.0
    labels = table[:, -1].astype(np.int64)
    rng = np.random.default_rng(SPLIT_SEED)
    test_idx: list[int] = []
    for cls in range(10):
        members = np.flatnonzero(labels == cls)
        rng.shuffle(members)
        test_idx.extend(members[: round(len(members) * TEST_FRACTION)].tolist())
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test_idx] = True
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    mask = torch.from_numpy(is_test)
    return x[~mask], y[~mask], x[mask], y[mask]
