"""`spotrun cost` end to end: the real CLI over a real ledger of past runs (spotlab/costs.py
builds them through the Ledger API: they are from 2025), whose prices the CLI fetches itself
from the lab's EC2 (DescribeSpotPriceHistory) and Pricing API, as the README's IAM user."""

from __future__ import annotations

import csv
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab import costs as costlab
from spotlab.costs import EXPECTED
from spotlab.fixtures import use_lab
from spotrun.cost.amounts import format_usd
from spotrun.cost.reports import TARGET_METHOD
from spotrun.cost.rules import AWS_METHOD, LOCAL_METHOD
from tests.conftest import Env

pytestmark = pytest.mark.slow


@pytest.fixture
def priced(env: Env, lab: Lab) -> Iterator[Env]:
    """The runs in the ledger, their price histories and on-demand price in the lab."""
    for zone, history in (("us-east-1a", costlab.HISTORY_A), ("us-east-1b", costlab.HISTORY_B)):
        lab.prices.set_spot(costlab.TYPE, zone, [(at, float(p)) for at, p in history])
    lab.prices.set_on_demand(costlab.TYPE, float(costlab.ON_DEMAND))
    # root_volume_gb: the volume the runs are billed for (their records list none)
    with use_lab(env, lab, root_volume_gb=costlab.ROOT_GB):
        costlab.build(env.home)
        yield env


def exact(amount: object) -> float:
    return float(amount)  # type: ignore[arg-type]


def test_table_states_amounts_to_the_cent_and_the_method_once(priced: Env, lab: Lab) -> None:
    proc = priced.cli("cost", check=True)
    # The CLI asked the lab's EC2 for the histories of both zones, and the Pricing API ...
    asked = {c.get("AvailabilityZone") for c in lab.front.spot_prices.calls}
    assert {"us-east-1a", "us-east-1b"} <= asked, lab.front.spot_prices.calls
    assert lab.front.on_demand.calls >= 1
    # ... once: the next report reads the ledger's price cache.
    calls = len(lab.front.spot_prices.calls)
    assert priced.cli("cost", check=True).stdout == proc.stdout
    assert len(lab.front.spot_prices.calls) == calls
    lines = proc.stdout.splitlines()
    for name, want in EXPECTED.items():
        (line,) = [row for row in lines if row.startswith(name + " ")]
        assert format_usd(want.total) in line, line
        if want.on_demand:
            assert format_usd(want.on_demand) in line
    (alpha,) = [row for row in lines if row.startswith("alpha ")]
    assert "50m00s" in alpha and format_usd(costlab.ALPHA_COST_TO_TARGET) in alpha
    (gamma,) = [row for row in lines if row.startswith("gamma ")]
    assert "not reached" in gamma
    (total,) = [row for row in lines if row.startswith("total ")]
    assert (
        format_usd(sum((w.total for w in EXPECTED.values()), start=0 * EXPECTED["alpha"].spot))
        in total
    )
    for method in (AWS_METHOD, LOCAL_METHOD, TARGET_METHOD):
        assert proc.stdout.count(f"method: {method}") == 1


def test_json_and_csv_rows(priced: Env) -> None:
    rows = {r["name"]: r for r in json.loads(priced.cli("cost", "--json", check=True).stdout)}
    for name, want in EXPECTED.items():
        row = rows[name]
        assert row["cost_usd"] == exact(want.total)
        assert row["spot_usd"] == exact(want.spot)
        assert row["storage_usd"] == exact(want.storage)
        assert row["on_demand_usd"] == exact(want.on_demand)
        assert row["instance_seconds"] == want.instance_s
    alpha = rows["alpha"]
    assert alpha["time_to_target_s"] == 3000.0
    assert alpha["cost_to_target_usd"] == exact(costlab.ALPHA_COST_TO_TARGET)
    saving = 100 * (1 - EXPECTED["alpha"].total / EXPECTED["alpha"].on_demand)
    assert alpha["saving_pct"] == round(float(saving), 1)
    assert rows["home"]["saving_pct"] is None and rows["home"]["cost_usd"] == 0.0

    table = list(csv.DictReader(io.StringIO(priced.cli("cost", "--csv", check=True).stdout)))
    assert [r["name"] for r in table] == list(rows)
    for r in table:
        assert float(r["cost_usd"]) == rows[r["name"]]["cost_usd"]

    sweep = json.loads(priced.cli("cost", "--sweep", "sw1", "--json", check=True).stdout)
    assert [r["name"] for r in sweep] == ["beta", "gamma"]
    days = list(
        csv.DictReader(io.StringIO(priced.cli("cost", "--by", "day", "--csv", check=True).stdout))
    )
    assert [d["day"] for d in days] == ["2025-03-10", "2025-03-11"]
    aws_total = sum(
        (EXPECTED[n].total for n in ("alpha", "beta", "gamma")), start=0 * EXPECTED["alpha"].spot
    )
    assert float(days[0]["cost_usd"]) == exact(aws_total)

    # ls and status show the recorded cost
    listed = {r["name"]: r for r in priced.runs()}
    assert listed["alpha"]["cost_usd"] == round(float(EXPECTED["alpha"].total), 6)


def _png_size_and_colours(path: Path) -> tuple[int, int, int]:
    """Width, height, and how many distinct RGB(A) pixel values: read with zlib, no Pillow."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            channels = {2: 3, 6: 4}[body[9]]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    # Filtered bytes still differ wherever pixels differ; enough to tell a drawing from a blank.
    colours = {
        raw[i : i + channels]
        for row in range(0, len(raw), stride)
        for i in range(row + 1, row + stride, channels * 7)
    }
    return width, height, len(colours)


def test_plot_writes_a_real_png(priced: Env, tmp_path: Path) -> None:
    out = tmp_path / "cost.png"
    proc = priced.cli("cost", "--plot", str(out), check=True)
    assert f"wrote {out}" in proc.stderr
    width, height, colours = _png_size_and_colours(out)
    assert (width, height) == (1100, 715)  # 10 x 6.5 inches at 110 dpi
    assert colours > 20


def test_bad_input_is_refused_before_any_work(priced: Env, tmp_path: Path) -> None:
    both = priced.cli("cost", "--json", "--csv")
    assert both.returncode == 2 and "choose one" in both.stderr
    jpg = priced.cli("cost", "--plot", str(tmp_path / "x.jpg"))
    assert jpg.returncode == 2 and "ending in .png" in jpg.stderr
    assert not (tmp_path / "x.jpg").exists()
    assert priced.cli("cost", "--sweep", "nope").returncode == 2
    since = priced.cli("cost", "--since", "yesterday-ish")
    assert since.returncode == 2 and "not a date" in since.stderr
    mixed = priced.cli("cost", "alpha", "--sweep", "sw1")
    assert mixed.returncode == 2 and "not both" in mixed.stderr
