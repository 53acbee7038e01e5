"""`spotrun sweep --search pbt` on the local cloud: a population of 3 trains 2 generations of
one epoch; the worst member's second run starts from the best member's checkpoint (the very
file, by its SHA-256; the trainer resumes at its step) with perturbed values, and `sweep
status` shows the lineage. Bad PBT input launches nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from spotrun.core.rundir import CHECKPOINTS_DIR, JOB_LOG_FILE, METRICS_FILE
from tests.conftest import Env
from tests.e2e.sweep_ledger import sweeps_and_runs

pytestmark = pytest.mark.slow


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_worst_member_goes_on_from_the_best_members_checkpoint(env: Env) -> None:
    proc = env.cli(
        "sweep",
        "digits-fast",
        "--search",
        "pbt",
        "--trials",
        "3",
        "--pbt-interval",
        "1",
        "--space",
        "lr=0.001:0.5:log",
        "--set",
        "epochs=2",
        "--set",
        "threads=1",
        "--max-parallel",
        "2",
        "--seed",
        "3",
        "--name",
        "pop",
        timeout=420,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads(env.cli("sweep", "status", "pop", "--json", check=True).stdout)
    assert status["search"] == "pbt" and status["counts"]["trials"] == 6
    rows = {row["trial"]: row for row in status["leaderboard"]}
    assert all(row["status"] == "succeeded" for row in rows.values()), rows
    first = {i: rows[i]["test_acc"] for i in range(3)}
    # exactly one member (the bottom third) copied another's weights: the worst from the best
    copied_rows = [rows[3 + m] for m in range(3) if rows[3 + m]["lineage"]["exploited"]]
    assert len(copied_rows) == 1, rows
    copied = copied_rows[0]
    lineage = copied["lineage"]
    worst, best = lineage["member"], lineage["trial"]
    assert first[worst] == min(first.values()) and first[best] == max(first.values()), first
    assert first[best] > first[worst]
    assert lineage["from"] == f"t{best}@epoch1" and lineage["generation"] == 1
    # explored: the donor's lr times or divided by 1.2
    donor_lr, new_lr = float(rows[best]["params"]["lr"]), float(copied["params"]["lr"])
    assert new_lr == pytest.approx(donor_lr * 1.2, rel=1e-4) or new_lr == pytest.approx(
        donor_lr / 1.2, rel=1e-4
    )
    assert lineage["params_before"] == rows[worst]["params"]
    # the very checkpoint file: the donor's, byte for byte, in the worst member's new run
    donor_dir = env.home / "runs" / rows[best]["run_id"]
    ckpt = lineage["checkpoint"]
    donor_bytes = (donor_dir / CHECKPOINTS_DIR / ckpt).read_bytes()
    assert lineage["sha256"] == _sha256(donor_bytes)
    new_dir = env.home / "runs" / copied["run_id"]
    assert _sha256((new_dir / CHECKPOINTS_DIR / ckpt).read_bytes()) == lineage["sha256"]
    # the trainer resumed at the donor's step and trained only the second epoch
    step = lineage["step"]
    assert f"resumed at epoch 1 step {step}" in (new_dir / JOB_LOG_FILE).read_text()
    records = [json.loads(line) for line in (new_dir / METRICS_FILE).read_text().splitlines()]
    assert [r["epoch"] for r in records if "test_acc" in r] == [2], records
    # the other members went on from their own checkpoints, values unchanged
    for member in {0, 1, 2} - {worst}:
        own = rows[3 + member]["lineage"]
        assert not own["exploited"] and own["trial"] == member, own
        assert rows[3 + member]["params"] == rows[member]["params"]
    text = env.cli("sweep", "status", "pop", check=True).stdout
    assert "FROM" in text and f"t{best}@epoch1 (copied)" in text
    assert f"trial {3 + worst} (member {worst}, generation 1) from t{best}@epoch1, {ckpt}" in text
    curves = json.loads(env.cli("plot", "pop", "--json", check=True).stdout)["curves"]
    legends = {c["run"]: c["legend"] for c in curves}
    assert legends[copied["run_id"]].startswith(f"t{3 + worst} lr=")
    assert legends[copied["run_id"]].endswith(f" from t{best}@epoch1")


def test_bad_pbt_input_exits_2_and_launches_nothing(env: Env) -> None:
    space = ["--space", "lr=0.01:0.5"]
    for args, message in (
        (["--search", "pbt", "--trials", "3", *space], "needs --pbt-interval"),
        (["--search", "pbt", "--trials", "3", "--pbt-interval", "12", *space], "one generation"),
        (["--search", "pbt", "--trials", "1", "--pbt-interval", "2", *space], "at least 2"),
        (["--grid", "lr=0.1,0.2", "--pbt-interval", "2"], "are for --search pbt"),
        (
            ["--search", "pbt", "--trials", "3", "--pbt-interval", "2", "--pbt-perturb", "0.8"],
            "above 1",
        ),
    ):
        proc = env.cli("sweep", "digits-fast", *args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert sweeps_and_runs(env) == (0, 0) and env.sessions() == []
