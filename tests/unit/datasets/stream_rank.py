"""One torchrun worker of test_stream_data's torchrun test (run as a script, not collected).

    python -m torch.distributed.run --nproc-per-node 2 stream_rank.py RUN_DIR URI FLAGS LAST

The real S3 store, except that the set's last training shard is fetched only once every rank
has trained a batch (FLAGS/trained-RANK): if a rank waited for the whole set before training,
that shard would never come and the stager would fail. A rank that fetches anything leaves
FLAGS/fetched-RANK.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from spotrun.cloud.aws import datasets as s3_datasets
from spotrun.cloud.aws.datasets import S3Store
from spotrun.core.waiting import wait_until
from spotrun.recipes import get_recipe
from spotrun.train.build import build_trainer
from spotrun.train.callbacks import Callback
from spotrun.train.distributed import LaunchEnv, init_process_group, leave_process_group
from spotrun.train.events import Event
from spotrun.train.state import State

RECIPE = [
    "model=cifar-fastnet",
    'model_options={"widths": [8, 8, 8]}',
    "num_classes=3",
    "batch_size=4",  # the global batch: 2 per rank on 2 ranks
    "epochs=2",
    "threads=1",
    "data_workers=0",
    "image_size=12",
    "normalize=imagenet",
    "stream_data=true",
]


def main() -> None:
    run_dir, uri, flags, last = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    launch = LaunchEnv.from_environ()
    world = launch.world_size

    class HeldBack(S3Store):
        def stream(self, key: str, start: int, end: int) -> Any:
            (flags / f"fetched-{launch.rank}").touch()
            if key.endswith(last):
                wait_until(
                    lambda: all((flags / f"trained-{r}").exists() for r in range(world)),
                    timeout_s=60,
                    what="every rank to train a batch before the last shard comes",
                )
            return super().stream(key, start, end)

    class Trained(Callback):
        def on_event(self, event: Event, state: State) -> None:
            if event is Event.BATCH_END:
                (flags / f"trained-{launch.rank}").touch()

    s3_datasets.S3Store = HeldBack  # type: ignore[misc]
    joined = init_process_group(launch)
    try:
        recipe = get_recipe("digits-fast", [f"data={uri}", *RECIPE])
        trainer = build_trainer(recipe, run_dir / f"rank-{launch.rank}", launch, [Trained()])
        result = trainer.fit()
        print(f"rank {launch.rank} of {world}: step {result.step}", flush=True)
    finally:
        if joined:
            leave_process_group()


if __name__ == "__main__":
    main()
