"""Training on the first shards while the rest stream in (a recipe's `stream_data`).

The evaluation split is staged first, before training starts; the training split's shards are
staged by a background thread in manifest order. The loader asks `ShardFeed.wait(shard)` for
each training shard in that order: it returns the shard's file names once the stager's marker
for it exists (written only after its bytes matched the manifest and every file is in place),
and raises the stager's own error if staging failed.

Under torchrun only the first rank of each node stages (`run_in_background`); the node's other
ranks `follow`: they read the same markers and wait for the same shards, and never fetch. If
the staging rank fails, torchrun stops them with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from spotrun.core.errors import DataError
from spotrun.core.waiting import Backoff, wait_until
from spotrun.datasets.layout import StageLayout
from spotrun.datasets.manifest import Manifest, Shard

# How long the loader waits for one shard before it gives up: staging moves at least tens of
# MB/s, and a shard is at most a few GB.
SHARD_WAIT_S = 3600.0
POLL = Backoff(first_s=0.05, factor=1.5, max_s=0.5)


class ShardFeed:
    def __init__(self, layout: StageLayout, manifest: Manifest, train_split: str) -> None:
        self.layout = layout
        self.manifest = manifest
        self.train_shards: list[Shard] = [s for s in manifest.shards if s.split == train_split]
        self.taken = 0  # training shards handed to the loader so far
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._following = False

    @property
    def train_files(self) -> int:
        return sum(s.files for s in self.train_shards)

    def run_in_background(self, stage_rest: Callable[[], object]) -> None:
        """Stage the rest of the set in a daemon thread; its error is kept for `wait`."""

        def work() -> None:
            try:
                stage_rest()
            except BaseException as exc:  # handed to the loader, raised there
                self.error = exc
            finally:
                self.finished.set()

        self._thread = threading.Thread(target=work, name="stage-rest", daemon=True)
        self._thread.start()

    def follow(self) -> None:
        """Another process on this machine stages the set: wait for its markers only."""
        self._following = True

    def wait_prepared(self, timeout_s: float = SHARD_WAIT_S) -> None:
        """Until the staging process has prepared the folder for this manifest's version and
        staged the evaluation split (a follower's start; markers from an older version of the
        set are not trusted before then)."""
        evaluation = [s for s in self.manifest.shards if s.split == self.manifest.eval_split]

        def ready() -> bool:
            if self.layout.version() != self.manifest.digest:
                return False
            return all(self._in_place(s) for s in evaluation)

        what = "the evaluation split to be staged"
        wait_until(ready, timeout_s=timeout_s, what=what, backoff=POLL)

    def _in_place(self, shard: Shard) -> bool:
        marker = self.layout.shard_marker(shard.name)
        return marker is not None and marker.get("sha256") == shard.sha256

    def _names(self, shard: Shard) -> list[str] | None:
        marker = self.layout.shard_marker(shard.name)
        if marker is not None and marker.get("sha256") == shard.sha256:
            names = marker.get("names")
            if isinstance(names, list):
                return [str(n) for n in names]
        if self._following:
            return None  # the staging rank's failure stops this one through torchrun
        if self.error is not None:
            raise DataError(f"staging stopped before shard {shard.name}: {self.error}")
        if self.finished.is_set() and self.layout.shard_marker(shard.name) is None:
            raise DataError(f"staging ended without shard {shard.name}")
        return None

    def wait(self, shard: Shard) -> list[str]:
        """`shard`'s file names (relative to the data set's folder), once it is in place."""
        names = wait_until(
            lambda: self._names(shard),
            timeout_s=SHARD_WAIT_S,
            what=f"shard {shard.name} to be staged",
            backoff=POLL,
        )
        self.taken += 1
        return names

    def wait_all(self) -> None:
        """Until the whole set is in place (the stager's error, if it failed)."""
        if self._following:
            wait_until(
                lambda: self.layout.complete() is not None,
                timeout_s=SHARD_WAIT_S,
                what="the data set to be staged",
                backoff=POLL,
            )
            return
        self.finished.wait()
        if self.error is not None:
            raise self.error

    @property
    def root(self) -> Path:
        return self.layout.dest
