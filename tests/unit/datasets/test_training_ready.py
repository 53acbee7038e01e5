"""`data push --max-side`: a folder of JPEGs pushed through the real CLI to moto's S3, staged,
and read by the streamed loader with its crops cut on the device."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import UsageError
from spotrun.datasets.layout import staged_images
from spotrun.datasets.manifest import Manifest, StoredImages, read_manifest
from spotrun.datasets.spec import parse_s3
from spotrun.datasets.stager import StageOptions, stage
from spotrun.datasets.training_ready import fitted_size, training_ready
from spotrun.train.data.augment import ImagePipeline
from spotrun.train.data.batches import Sharding
from spotrun.train.data.source import index_split
from spotrun.train.data.streamed import StreamedImageBatches, crops_on_device

Bucket = tuple[str, Any]
COLOURS = {"cat": (220, 30, 30), "dog": (30, 220, 30), "frog": (30, 30, 220)}
OPTIONS = StageOptions(streams=4, reserve_bytes=0, min_part_bytes=4096, log_every_s=0.0)


def _jpeg_folder(root: Path) -> Path:
    """train/ (120x90 JPEGs, one 40x30) and test/, each class its own colour plus noise."""
    rng = np.random.default_rng(0)
    for split, count in (("train", 4), ("test", 1)):
        for name, colour in COLOURS.items():
            for i in range(count):
                w, h = (40, 30) if (split, name, i) == ("train", "cat", 0) else (120, 90)
                noise = rng.integers(-20, 21, (h, w, 3))
                pixels = np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)
                (root / split / name).mkdir(parents=True, exist_ok=True)
                Image.fromarray(pixels).save(root / split / name / f"{i:02d}.jpg", quality=95)
    return root


def test_training_ready_shrinks_to_the_longest_side_and_keeps_small_jpegs(tmp_path: Path) -> None:
    form = StoredImages(max_side=64, quality=80)
    big = tmp_path / "big.jpg"
    Image.new("RGB", (300, 200), (10, 200, 90)).save(big, quality=95)
    ready = training_ready(big, form)
    assert ready is not None
    with Image.open(io.BytesIO(ready)) as image:
        assert image.format == "JPEG" and image.size == (64, 43) == fitted_size(300, 200, 64)
    small = tmp_path / "small.jpg"
    Image.new("RGB", (50, 64)).save(small)
    assert training_ready(small, form) is None  # stored byte for byte
    png = tmp_path / "small.png"
    Image.new("RGB", (20, 10)).save(png)
    as_jpeg = training_ready(png, form)
    assert as_jpeg is not None and Image.open(io.BytesIO(as_jpeg)).format == "JPEG"
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(UsageError, match="broken.jpg"):
        training_ready(broken, form)


def test_a_manifest_pushed_as_it_was_keeps_its_digest() -> None:
    plain = Manifest(name="s", created_at=1.0, classes=["a"], eval_split="val", shards=[])
    assert "images" not in plain.to_json()
    ready = plain.model_copy(update={"images": StoredImages(max_side=256, quality=90)})
    assert read_manifest(ready.to_json(), "m").images == StoredImages(max_side=256, quality=90)
    assert ready.digest != plain.digest


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPOTRUN_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "spotrun", *args], env=env, capture_output=True, text=True
    )


def test_cli_push_with_max_side_stages_a_store_the_loader_crops_on_the_device(
    tmp_path: Path, s3_bucket: Bucket
) -> None:
    bucket, _ = s3_bucket
    folder = _jpeg_folder(tmp_path / "pets")
    uri = f"s3://{bucket}/sets/pets"
    pushed = _cli(
        "data", "push", str(folder), uri, "--max-side", "64", "--quality", "85",
        "--keep-original", "--shard-size", "1MB", home=tmp_path / "home",
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    assert "training-ready (longer side <= 64 px, JPEG quality 85)" in pushed.stdout

    staged = stage(S3Store(bucket), parse_s3(uri), tmp_path / "nvme", OPTIONS, print).dest
    assert staged_images(staged) == StoredImages(max_side=64, quality=85)
    for name in COLOURS:
        for path in sorted((folder / "train" / name).iterdir()):
            stored = staged / "train" / name / path.name
            with Image.open(stored) as image, Image.open(path) as original:
                want = fitted_size(*original.size, 64)
                assert image.format == "JPEG" and image.size == want
        for path in (folder / "test" / name).iterdir():  # the evaluation split as it was
            assert (staged / "test" / name / path.name).read_bytes() == path.read_bytes()
    kept = (folder / "train" / "cat" / "00.jpg").read_bytes()  # 40x30: already small enough
    assert (staged / "train" / "cat" / "00.jpg").read_bytes() == kept

    originals = stage(S3Store(bucket), parse_s3(uri + "/original"), tmp_path / "o", OPTIONS, print)
    assert staged_images(originals.dest) is None
    for path in (folder / "train" / "dog").iterdir():
        assert (originals.dest / "train" / "dog" / path.name).read_bytes() == path.read_bytes()

    assert crops_on_device(staged, torch.device("cuda"))  # a GPU would crop this set itself
    assert not crops_on_device(staged, torch.device("cpu"))
    assert not crops_on_device(originals.dest, torch.device("cuda"))

    index = index_split(staged / "train", sorted(COLOURS))
    source = StreamedImageBatches(
        [str(index.path(i)) for i in range(len(index))],
        list(index.labels),
        4,
        ImagePipeline(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)),
        train=True,
        decode_size=48,
        sharding=Sharding(seed=1),
        crop_on_device=True,  # forced here: this machine has no GPU
    )
    seen = []
    for x, labels in source.batches(epoch=0):
        assert x.shape == (4, 3, 48, 48)
        for image, label in zip(x, labels.tolist()):
            colour = image.mean(dim=(1, 2))  # 0..1 per channel
            assert int(colour.argmax()) == label, (colour, label)  # cat red, dog green, frog blue
            seen.append(label)
    assert sorted(seen) == sorted(index.labels)
