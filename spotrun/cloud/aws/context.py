"""Where a launch lands: the region's image and subnets, resolved once and shared briefly.

`spotrun launch` resolves them while it checks the input; the supervisor that carries the
launch out a moment later finds them under SPOTRUN_HOME/cache instead of asking EC2 and SSM
again. Kept ten minutes, and only for the settings they were resolved with.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path

from spotrun.cloud.aws import instances as ec2i
from spotrun.cloud.aws import network
from spotrun.cloud.aws.session import AwsClients

log = logging.getLogger(__name__)

TTL_S = 600.0


class LaunchContext:
    def __init__(self, clients: AwsClients, cache_dir: Path) -> None:
        self.clients = clients
        self.cache_dir = cache_dir
        self._images: dict[str, ec2i.Image] = {}
        self._subnets: dict[str, dict[str, network.Subnet]] = {}

    def subnets(self, region: str) -> dict[str, network.Subnet]:
        if region not in self._subnets:
            cached = self._read(region).get("subnets")
            if isinstance(cached, dict):
                self._subnets[region] = {z: network.Subnet(**v) for z, v in cached.items()}
            else:
                self._subnets[region] = network.launch_subnets(self.clients, region)
                self._write(region)
        return self._subnets[region]

    def image(self, region: str) -> ec2i.Image:
        if region not in self._images:
            cached = self._read(region).get("image")
            if isinstance(cached, dict):
                self._images[region] = ec2i.Image(**cached)
            else:
                self._images[region] = ec2i.resolve_image(self.clients, region)
                self._write(region)
        return self._images[region]

    def _path(self, region: str) -> Path:
        return self.cache_dir / f"aws-{region}.json"

    def _key(self) -> str:
        a = self.clients.settings
        return json.dumps(
            [a.image_id, a.image_ssm_parameter, a.architecture, a.subnet_id, a.subnet_ids]
        )

    def _read(self, region: str) -> dict[str, object]:
        try:
            data = json.loads(self._path(region).read_text())
        except (OSError, ValueError):
            return {}
        fresh = time.time() - float(data.get("at", 0)) < TTL_S
        return data if fresh and data.get("key") == self._key() else {}

    def _write(self, region: str) -> None:
        data: dict[str, object] = {"at": time.time(), "key": self._key()}
        if region in self._images:
            data["image"] = asdict(self._images[region])
        if region in self._subnets:
            data["subnets"] = {z: asdict(s) for z, s in self._subnets[region].items()}
        path = self._path(region)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({**self._read(region), **data}))
            os.replace(tmp, path)
        except OSError as exc:  # only costs the next process a lookup
            log.info("cannot write %s: %s", path, exc)
