"""What spotrun keeps here of a run's AWS resources: SPOTRUN_HOME/aws/runs/RUN.json.

The regions the run's resources live in (recorded at each launch: every later call goes to each;
a run planned across regions may have a replacement in another region than its first), the
instances RunInstances made for it, where and when (EC2's filtered listings may leave a new one out
for a while), the spotrun:expires tag each ClientToken was sent with, and whether it has a
cluster placement group to delete at its end.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path


class RegionRecords:
    def __init__(self, folder: Path, default_region: str) -> None:
        self.folder = folder
        self.default_region = default_region
        self._lock = threading.Lock()

    def path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.json"

    def _read(self, run_id: str) -> dict[str, object]:
        try:
            data = json.loads(self.path(run_id).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def region(self, run_id: str) -> str:
        """The region the run launched in last (recorded at launch)."""
        region = self._read(run_id).get("region")
        return str(region) if region is not None else self.default_region

    def regions(self, run_id: str) -> list[str]:
        """Every region the run has launched in, first one first (records of older versions
        name one region)."""
        listed = self._read(run_id).get("regions")
        if isinstance(listed, list) and listed:
            return [str(r) for r in listed]
        return [self.region(run_id)]

    def remember(self, run_id: str, region: str, **more: object) -> None:
        path = self.path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = self._read(run_id)
        known = record.get("regions")
        regions = [str(r) for r in known] if isinstance(known, list) else []
        if not regions and isinstance(record.get("region"), str):
            regions.append(str(record["region"]))
        if region not in regions:
            regions.append(region)
        record.update(region=region, regions=regions, **more)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)

    def remember_made(self, run_id: str, ids: list[str]) -> None:
        """The instances RunInstances made for the run, with when: EC2's filtered listings may
        leave them out for a while (eventual consistency), so they are also asked for by id."""
        with self._lock:
            region = self.region(run_id)
            made = {**self.made(run_id), **{i: time.time() for i in ids}}
            made_in = {**self._made_in(run_id), **{i: region for i in ids}}
            self.remember(run_id, region, made=made, made_in=made_in)

    def expiry(self, run_id: str, token: str, compute: Callable[[], float]) -> float:
        """The spotrun:expires moment of one RunInstances, the same for every repeat of it (a
        restarted supervisor's): EC2 refuses a ClientToken repeated with other tags."""
        with self._lock:
            known = self._read(run_id).get("expires", {})
            known = dict(known) if isinstance(known, dict) else {}
            if token not in known:
                known[token] = compute()
                self.remember(run_id, self.region(run_id), expires=known)
            return float(known[token])

    def made(self, run_id: str, region: str | None = None) -> dict[str, float]:
        """The instances made for the run and when (those made in `region`, when given)."""
        made = self._read(run_id).get("made", {})
        found = {str(k): float(v) for k, v in made.items()} if isinstance(made, dict) else {}
        if region is None:
            return found
        made_in = self._made_in(run_id)
        return {i: at for i, at in found.items() if made_in.get(i, self.region(run_id)) == region}

    def _made_in(self, run_id: str) -> dict[str, str]:
        made_in = self._read(run_id).get("made_in", {})
        return {str(k): str(v) for k, v in made_in.items()} if isinstance(made_in, dict) else {}

    def has_placement_group(self, run_id: str) -> bool:
        return bool(self._read(run_id).get("placement_group"))

    def forget(self, run_id: str) -> None:
        self.path(run_id).unlink(missing_ok=True)
