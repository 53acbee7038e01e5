"""The region choice respects where the data set lives (issue 32, item 3), in the lab's two
regions: a data set pushed to the lab's bucket (us-east-1) keeps the run there over a slightly
cheaper us-west-2, since moving it there costs more than the saving over the run's hours; a
much cheaper us-west-2 wins all the same, its line carrying the transfer. --dry-run says why."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.lab import OTHER_REGION, OTHER_ZONES, REGION
from spotrun.core.money import show_usd, show_usd_per_hour
from spotrun.cost.rules import CROSS_REGION_USD_PER_GB, GB
from tests.conftest import Env
from tests.unit.train.data.images import make_image_folder

pytestmark = pytest.mark.slow

BOTH = f"{REGION},{OTHER_REGION}"
MAX_HOURS = 0.1  # the transfer is spread over the run's cap: a short run feels it
EAST_PRICE = 0.0298  # the lab's cheapest c6i.large in us-east-1 (us-east-1c)


def _push(env: Env, lab: Lab, tmp_path: Path) -> tuple[str, float]:
    """A few MB of images pushed to the lab's bucket; its address and its transfer per hour."""
    folder = make_image_folder(tmp_path / "pets", per_class=60, per_class_test=10, size=96).root
    uri = f"s3://{lab.bucket}/sets/pets"
    env.cli("data", "push", str(folder), uri, "--shard-size", "1MB", check=True)
    (row,) = json.loads(env.cli("data", "ls", "--json", check=True).stdout)
    per_hour = float(CROSS_REGION_USD_PER_GB * row["bytes"] / GB) / MAX_HOURS
    return uri, per_hour


def _dry_run(env: Env, uri: str) -> str:
    proc = env.cli(
        "launch", "digits-fast", "--cloud", "aws", "--regions", BOTH,
        "--instance-type", "c6i.large", "--max-hours", str(MAX_HOURS), "--dry-run",
        "--set", f"data={uri}", "--set", "model=cifar-fastnet", "--set", "num_classes=3",
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return " ".join(proc.stdout.split())


def test_the_data_sets_region_wins_over_a_slightly_cheaper_one(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    uri, per_hour = _push(aws_env, lab, tmp_path)
    saving = 0.0002
    assert per_hour > 2 * saving  # the data set is big enough to outweigh the saving
    lab.prices.set_spot("c6i.large", OTHER_ZONES[0], [(time.time() - 86400, EAST_PRICE - saving)])
    said = _dry_run(aws_env, uri)
    assert "first of 5 fitting offer(s): c6i.large in us-east-1c" in said, said
    assert f"in {REGION} where its data set {uri} lives" in said, said
    assert (
        f"passed over c6i.large in {OTHER_ZONES[0]} ({show_usd_per_hour(EAST_PRICE - saving)}): "
        "expected $"
    ) in said, said
    assert (
        f"with {show_usd_per_hour(per_hour)} for moving {uri} from {REGION} ("
        f"{show_usd(per_hour * MAX_HOURS)} once, over {MAX_HOURS:g} h: --max-hours)"
    ) in said, said
    assert lab.front.run_requests == []  # a dry run launches nothing


def test_a_much_cheaper_region_wins_anyway_with_the_transfer_in_its_line(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    uri, per_hour = _push(aws_env, lab, tmp_path)
    cheap = 0.0200
    assert per_hour < (EAST_PRICE - cheap) / 2  # the saving outweighs moving the data set
    lab.prices.set_spot("c6i.large", OTHER_ZONES[0], [(time.time() - 86400, cheap)])
    said = _dry_run(aws_env, uri)
    assert f"cheapest of 5 fitting offer(s): c6i.large in {OTHER_ZONES[0]}" in said, said
    assert f"chose c6i.large in {OTHER_ZONES[0]}: {show_usd_per_hour(cheap)}, expected $" in said
    assert (
        f"and {show_usd_per_hour(per_hour)} for moving {uri} from {REGION} "
        f"({show_usd(per_hour * MAX_HOURS)} once, over {MAX_HOURS:g} h: --max-hours)"
    ) in said, said
    assert "passed over" not in said, said
    assert lab.front.run_requests == []
