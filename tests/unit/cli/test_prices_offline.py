"""`spotrun prices` without AWS credentials: spotrun's shipped, dated GPU catalog, and it says so
(the live path, with credentials, is tests/e2e/test_aws_input.py::test_prices_table)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Env


def _catalog() -> dict[str, Any]:
    text = resources.files("spotrun.cloud").joinpath("gpu_catalog.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@pytest.fixture
def offline(env: Env, tmp_path: Path) -> Env:
    """No credentials anywhere boto3 looks: environment, files, instance role."""
    env.vars = {k: v for k, v in env.vars.items() if not k.startswith("AWS_")}
    env.vars["AWS_CONFIG_FILE"] = str(tmp_path / "no-aws-config")
    env.vars["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-aws-credentials")
    env.vars["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def test_prices_without_credentials_show_the_dated_catalog(offline: Env) -> None:
    catalog = _catalog()
    proc = offline.cli("prices", check=True)
    # a model name may hold spaces (RTX PRO Server 6000): split the fixed columns off each end
    rows = []
    for line in proc.stdout.splitlines()[1:]:
        words = line.split()
        if words and words[0] in catalog["types"]:
            rows.append((*words[:3], " ".join(words[3:-3]), *words[-3:]))
    assert len(rows) == len(catalog["types"])  # every GPU type, each once
    for name, zone, gpus, model, spot, on_demand, _saving in rows:
        entry = catalog["types"][name]
        assert (zone, int(gpus), model) == ("any", entry["gpus"], entry["gpu_model"])
        want = entry.get("spot_usd_per_hour")
        assert spot == ("-" if want is None else f"{want:.4f}")
        assert on_demand != "-"  # the shipped on-demand table knows every catalog type
    known = [float(r[4]) for r in rows if r[4] != "-"]
    assert known and known == sorted(known)  # known spot prices first, cheapest first
    assert [r[4] for r in rows[len(known) :]] == ["-"] * (len(rows) - len(known))
    # the output says where the figures come from, their date, and that they are not live
    assert f"shipped catalog of {catalog['as_of']} ({catalog['region']})" in proc.stdout
    assert "no AWS credentials found: these are spotrun's shipped prices, not live" in proc.stdout
    assert proc.stderr == ""


def test_offline_prices_filter_like_a_launch(offline: Env) -> None:
    proc = offline.cli("prices", "--min-gpus", "4", "--gpu-model", "a10g", "--json", check=True)
    offers = json.loads(proc.stdout)
    assert offers and all(o["gpus"] >= 4 and o["gpu_model"] == "A10G" for o in offers)
    assert {o["instance_type"] for o in offers} == {"g5.12xlarge", "g5.24xlarge", "g5.48xlarge"}
    assert "note: no AWS credentials found" in proc.stderr  # --json keeps its shape
    proc = offline.cli("prices", "--instance-type", "p5.48xlarge", "--gpus", "8", check=True)
    assert "p5.48xlarge" in proc.stdout and "H100" in proc.stdout


def test_the_catalog_dates_its_figures_and_names_its_gaps() -> None:
    catalog = _catalog()
    assert catalog["as_of"] and "read on as_of" in catalog["source"]
    assert "commit " in catalog["source"]  # the collected figures are pinned to one version
    for name, entry in catalog["types"].items():
        assert entry["gpus"] >= 1 and entry["gpu_memory_gb"] > 0, name
        if entry.get("spot_usd_per_hour") is None:
            assert name in catalog["note"], (
                f"{name} has no typical spot price and the note says not"
            )
        else:
            assert 0 < entry["spot_usd_per_hour"] < 200, name


def test_offline_prices_list_the_newer_families(offline: Env) -> None:
    proc = offline.cli("prices", "--gpus", "8", "--gpu-model", "h200", "--json", check=True)
    offers = json.loads(proc.stdout)
    assert [o["instance_type"] for o in offers] == ["p5en.48xlarge"]
    assert offers[0]["spot_usd_per_hour"] is not None and offers[0]["saving_pct"] > 0
    proc = offline.cli("prices", "--gpu-model", "RTX PRO Server 6000", "--json", check=True)
    names = {o["instance_type"] for o in json.loads(proc.stdout)}
    assert names and all(n.startswith("g7e.") for n in names)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "0"], "lists GPU types only"),
        (["--region", "eu-west-1"], "holds us-east-1 prices only"),
        (["--gpu-model", "MI300X"], "no offer has 1 GPU(s), model MI300X"),
    ],
)
def test_offline_prices_say_what_they_cannot_show(
    offline: Env, args: list[str], message: str
) -> None:
    proc = offline.cli("prices", *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr


def test_an_unknown_profile_also_falls_back(offline: Env) -> None:
    offline.vars["AWS_PROFILE"] = "nope"
    proc = offline.cli("prices", "--gpus", "8", check=True)
    assert "p4d.24xlarge" in proc.stdout
    assert "AWS profile 'nope' is not in the AWS config files: these are spotrun's shipped" in (
        proc.stdout
    )
