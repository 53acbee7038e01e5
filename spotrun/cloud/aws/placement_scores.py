"""EC2's spot placement scores (GetSpotPlacementScores) per instance type and zone.

A score (1-10) says how likely a spot request for that type is to be filled in a zone now
("Spot placement score", EC2 User Guide). EC2 answers per Availability Zone ID (use1-az4), so
the zone names come from DescribeAvailabilityZones. AWS limits how many distinct
configurations an account may score in a day (the page's "Limitations"), so only the few
cheapest types are asked, one call each, and the answers are kept an hour under
SPOTRUN_HOME/cache. A caller without ec2:GetSpotPlacementScores, or any refusal, leaves the
pools unscored: ranking then falls back on its prior and the ledger's history.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from spotrun.cloud.aws.session import AwsClients
from spotrun.cloud.base import Offer
from spotrun.cloud.ranking import Pool

log = logging.getLogger(__name__)

MAX_TYPES_SCORED = 4  # the cheapest types only: each is one configuration of the daily limit
TTL_S = 3600.0


class PlacementScores:
    def __init__(self, clients: AwsClients, cache_dir: Path) -> None:
        self.clients = clients
        self.cache_dir = cache_dir

    def scores(self, offers: Sequence[Offer], nodes: int = 1) -> dict[Pool, int]:
        """Scores per (instance type, zone) of the spot offers' cheapest types."""
        spot = sorted((o for o in offers if o.market == "spot"), key=lambda o: o.usd_per_hour)
        types: list[str] = []
        for offer in spot:
            if offer.instance_type not in types:
                types.append(offer.instance_type)
        regions = sorted({o.region for o in spot})
        found: dict[Pool, int] = {}
        for instance_type in types[:MAX_TYPES_SCORED]:
            by_zone = self._type_scores(instance_type, regions, nodes)
            if by_zone is None:
                break  # not permitted (or refused): asking for the next type would be too
            found.update({(instance_type, zone): score for zone, score in by_zone.items()})
        return found

    def _type_scores(
        self, instance_type: str, regions: list[str], nodes: int
    ) -> dict[str, int] | None:
        """zone name -> score for one type in these regions; None when EC2 would not say."""
        key = json.dumps([instance_type, regions, nodes])
        path = self.cache_dir / f"placement-scores-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        try:
            data = json.loads(path.read_text())
            if time.time() - float(data["at"]) < TTL_S:
                return {str(z): int(s) for z, s in data["scores"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # no cache, or an unreadable one: ask EC2
        home = self.clients.settings.region
        try:
            answer = self.clients.client("ec2", home).get_spot_placement_scores(
                InstanceTypes=[instance_type],
                TargetCapacity=nodes,
                TargetCapacityUnitType="units",
                SingleAvailabilityZone=True,
                RegionNames=regions,
            )
            names = self._zone_names(regions)
        except (ClientError, BotoCoreError) as exc:
            log.info("no spot placement scores for %s: %s", instance_type, exc)
            return None
        scores = {
            names[item["AvailabilityZoneId"]]: int(item["Score"])
            for item in answer.get("SpotPlacementScores", [])
            if item.get("AvailabilityZoneId") in names and "Score" in item
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"at": time.time(), "scores": scores}))
            os.replace(tmp, path)
        except OSError:
            pass  # only costs the next launch one call
        return scores

    def _zone_names(self, regions: list[str]) -> Mapping[str, str]:
        """Availability Zone ID -> zone name in these regions."""
        names: dict[str, str] = {}
        for region in regions:
            zones = self.clients.client("ec2", region).describe_availability_zones()
            for zone in zones.get("AvailabilityZones", []):
                names[str(zone["ZoneId"])] = str(zone["ZoneName"])
        return names
