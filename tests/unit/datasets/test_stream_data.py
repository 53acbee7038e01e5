"""stream_data: training starts on the first shards while the rest are still being fetched.

Real shards pushed to moto's S3, the real stager and a real (tiny) training run. The store is
the real S3 store, held back on the last training shard until the trainer has finished a batch:
if training waited for the whole set, that shard would never come and the test would fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from spotrun.cloud.aws import datasets as s3_datasets
from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import read_manifest
from spotrun.datasets.push import push
from spotrun.datasets.spec import parse_s3
from spotrun.recipes import get_recipe
from spotrun.train.build import build_trainer
from spotrun.train.callbacks import Callback
from spotrun.train.events import Event
from spotrun.train.state import State
from tests.conftest import REPO
from tests.unit.train.data.images import make_image_folder

TINY = [
    "model=cifar-fastnet",
    'model_options={"widths": [8, 8, 8]}',
    "num_classes=3",
    "batch_size=4",
    "epochs=2",
    "threads=1",
    "data_workers=0",
    "image_size=12",
    "normalize=imagenet",
    "stream_data=true",
]


class FirstBatch(Callback):
    def __init__(self, done: threading.Event, stop_at: int | None = None) -> None:
        self.done = done
        self.stop_at = stop_at

    def on_event(self, event: Event, state: State) -> None:
        if event is Event.BATCH_END:
            self.done.set()
            if state.step == self.stop_at:
                state.stop_signal = signal.SIGTERM  # as a spot notice would


def test_training_starts_on_the_first_shards_and_resumes_exactly(
    tmp_path: Path, s3_bucket: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, _ = s3_bucket
    monkeypatch.setenv("SPOTRUN_HOME", str(tmp_path / "home"))
    folder = make_image_folder(tmp_path / "pets", per_class=4, per_class_test=2, size=12).root
    uri = f"s3://{bucket}/sets/pets"
    pushed = push(S3Store(bucket), folder, parse_s3(uri), shard_size=1500, parallel=2, log=print)
    train_shards = [s.name for s in pushed.manifest.shards if s.split == "train"]
    assert len(train_shards) >= 3
    trained = threading.Event()
    held: list[str] = []

    class HeldBack(S3Store):
        """The real store; the last training shard only once a batch has been trained."""

        def stream(self, key: str, start: int, end: int) -> Any:
            if key.endswith(train_shards[-1]):
                held.append(key)
                if not trained.wait(timeout=60):
                    raise RuntimeError("training did not start before the last shard came")
            return super().stream(key, start, end)

    monkeypatch.setattr(s3_datasets, "S3Store", HeldBack)
    monkeypatch.setenv("SPOTRUN_STAGE_RESERVE_BYTES", "0")
    monkeypatch.setenv("SPOTRUN_STAGE_STREAMS", "2")
    recipe = get_recipe("digits-fast", [f"data={uri}", *TINY])
    (tmp_path / "reference").mkdir()
    reference = build_trainer(recipe, tmp_path / "reference", extra_callbacks=[FirstBatch(trained)])
    done = reference.fit()
    assert held and trained.is_set()
    assert not done.interrupted and done.step == 2 * (12 // 4)
    assert 0 <= done.metrics["test_acc"] <= 1

    # A restart mid-way through the first epoch (the set now complete on disk) trains exactly
    # what the unbroken run did: the first epoch's order depends on the manifest and seed only.
    (tmp_path / "resumed").mkdir()
    first = build_trainer(recipe, tmp_path / "resumed", extra_callbacks=[FirstBatch(trained, 2)])
    assert first.fit().interrupted
    torch.manual_seed(4321)
    second = build_trainer(recipe, tmp_path / "resumed")
    result = second.fit()
    assert second.resumed_from is not None and result.step == done.step
    want, got = reference.state.model.state_dict(), second.state.model.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)
    staged = tmp_path / "home" / "spotrun-data" / bucket / "sets/pets/.spotrun-stage"
    assert read_manifest((staged / "manifest.json").read_text(), "").digest == (
        pushed.manifest.digest
    )
    assert (staged / "complete.json").exists()


def test_stream_data_needs_known_statistics() -> None:
    with pytest.raises(UsageError, match="normalize=imagenet"):
        get_recipe("digits-fast", ["data=s3://sets-x/pets", "stream_data=true"], data_here=False)


@pytest.mark.slow
def test_under_torchrun_every_rank_starts_on_the_first_shards(
    tmp_path: Path, s3_bucket: tuple[str, Any]
) -> None:
    """Two gloo processes: rank 0 stages (LOCAL_RANK 0), rank 1 follows its markers; both
    train a batch before the last training shard is fetched (stream_rank.py holds it back)."""
    bucket, _ = s3_bucket
    folder = make_image_folder(tmp_path / "pets", per_class=4, per_class_test=2, size=12).root
    uri = f"s3://{bucket}/sets/pets"
    pushed = push(S3Store(bucket), folder, parse_s3(uri), shard_size=1500, parallel=2, log=print)
    train_shards = [s.name for s in pushed.manifest.shards if s.split == "train"]
    assert len(train_shards) >= 3
    flags = tmp_path / "flags"
    flags.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "SPOTRUN_HOME": str(tmp_path / "home"),
        "SPOTRUN_STAGE_RESERVE_BYTES": "0",
        "SPOTRUN_STAGE_STREAMS": "2",
    }
    script = Path(__file__).with_name("stream_rank.py")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(script),
            str(tmp_path / "run"),
            uri,
            str(flags),
            train_shards[-1],
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    steps = 2 * (12 // 2 // 2)  # 12 training images, 2 ranks, batches of 2, 2 epochs
    for rank in (0, 1):
        assert f"rank {rank} of 2: step {steps}" in out.stdout, out.stdout + out.stderr
        assert (flags / f"trained-{rank}").exists()
    assert (flags / "fetched-0").exists() and not (flags / "fetched-1").exists()
    staged = tmp_path / "home" / "spotrun-data" / bucket / "sets/pets/.spotrun-stage"
    assert (staged / "complete.json").exists()
