"""The real CIFAR-10 images (../shared/data/cifar10-jpeg.tar.gz beside the repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spotrun.recipes import get_recipe
from spotrun.train.data.loading import load_data
from spotrun.train.data.source import resolve_data

REPO = Path(__file__).resolve().parents[4]
ARCHIVE = REPO.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

pytestmark = [
    pytest.mark.needs_data,
    pytest.mark.skipif(
        not ARCHIVE.exists(),
        reason=f"the real CIFAR-10 images are not at {ARCHIVE} (../shared/data beside the repo)",
    ),
]


def test_archive_is_recognised_without_unpacking() -> None:
    location = resolve_data(str(ARCHIVE), REPO)
    assert (location.kind, location.archive) == ("image-folder", True)


@pytest.mark.slow
def test_all_images_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    recipe = get_recipe(
        "digits-fast", [f"data={ARCHIVE}", "batch_size=500", "augment.crop_padding=4"]
    )
    train, test = load_data(recipe)
    assert len(train) == 100 and len(test) == 20
    labels = torch.cat([y for _, y in test.batches(0)])
    assert torch.bincount(labels).tolist() == [1000] * 10
    x, _ = next(iter(train.batches(0)))
    assert x.shape == (500, 3, 32, 32) and x.dtype == torch.float32
    assert abs(float(x.mean())) < 0.2 and abs(float(x.std()) - 1) < 0.2
    cache = tmp_path / "home" / "cache"
    assert not (cache / "unpacked").exists()  # 20 MB read into memory, not 60,000 files
    metas = [json.loads(p.read_text()) for p in (cache / "images").glob("*.json")]
    assert len(metas) == 2 and all(m["classes"] == CLASSES for m in metas)
