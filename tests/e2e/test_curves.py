"""Curves: TensorBoard event files beside metrics.jsonl (read back by TensorBoard's own
EventAccumulator), W&B (offline mode) and MLflow (file store) when configured, and
`spotrun plot` over runs. Real CLI, real torch, real tmux."""

from __future__ import annotations

import glob
import json
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Env

pytestmark = pytest.mark.slow

# One thread: on a busy 2-core machine two threads spin against each other (issue 21).
QUICK = ["--set", "epochs=2", "--set", "threads=1"]


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _tensorboard_scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def _wandb_history(run_dir: Path) -> list[dict[str, str]]:
    """The history rows of every offline W&B run in run_dir/wandb, read from its .wandb files
    (LevelDB log framing: 32 KiB blocks of records with a 7-byte header, holding W&B's Record
    protobufs) with W&B's own protobuf classes."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    for path in sorted(glob.glob(str(run_dir / "wandb" / "offline-run-*" / "*.wandb"))):
        data = Path(path).read_bytes()
        assert data[:4] == b":W&B"
        pos, parts = 7, b""
        while pos + 7 <= len(data):
            left = 32768 - pos % 32768
            if left < 7:
                pos += left
                continue
            _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
            if length == 0 and kind == 0:
                break
            parts += data[pos + 7 : pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # a whole record, or the last part of one
                record = pb.Record()
                record.ParseFromString(parts)
                parts = b""
                if record.WhichOneof("record_type") == "history":
                    rows.append(
                        {
                            item.key or "/".join(item.nested_key): item.value_json
                            for item in record.history.item
                        }
                    )
    return rows


def test_train_writes_tensorboard_wandb_and_mlflow_curves_and_a_resume_shows_once(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    mlruns = tmp_path / "mlruns"
    trackers = replace(
        env,
        vars={
            **env.vars,
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "MLFLOW_TRACKING_URI": mlruns.as_uri(),
            "MLFLOW_ALLOW_FILE_STORE": "true",  # MLflow 3 wants a database unless told so
            "MLFLOW_EXPERIMENT_NAME": "curves-test",
        },
    )
    run_dir = tmp_path / "run"
    train = ("train", "digits-fast", "--run-dir", str(run_dir), *QUICK)
    first = trackers.cli(*train, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "logging is off" not in first.stderr
    (events,) = run_dir.glob("events.out.tfevents.*")
    lines = _metrics(run_dir)
    assert [line["epoch"] for line in lines] == [1, 2]

    # Resume from the first epoch's checkpoint: the second epoch is trained again and written
    # to a new event file; TensorBoard shows each evaluation once, as metrics.jsonl does.
    newest = sorted(run_dir.glob("checkpoints/ckpt-*.pt"))[-1]
    newest.unlink()
    again = trackers.cli(*train, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resumed at epoch 1 step {lines[0]['step']}" in again.stdout
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2
    lines = _metrics(run_dir)
    for tag in ("test_acc", "train_loss", "lr"):
        points = _tensorboard_scalars(run_dir, tag)
        assert [step for step, _ in points] == [line["step"] for line in lines], tag
        assert [v for _, v in points] == pytest.approx([line[tag] for line in lines], rel=1e-6)

    # MLflow: one run for the spotrun run (the resume logged into it), its parameters and
    # the evaluations at the trainer's steps.
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=mlruns.as_uri())
    experiment = client.get_experiment_by_name("curves-test")
    assert experiment is not None
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.run_name == "run" and found.info.status == "FINISHED"
    assert found.data.params["epochs"] == "2" and found.data.params["model"] == "digits-net"
    history = client.get_metric_history(found.info.run_id, "test_acc")
    assert {m.step for m in history} == {line["step"] for line in lines}
    assert found.data.metrics["test_acc"] == pytest.approx(lines[-1]["test_acc"])

    # W&B offline: both lifetimes of the run logged into run_dir/wandb, under the same run id.
    rows = [row for row in _wandb_history(run_dir) if "trainer/step" in row]
    steps = [int(row["trainer/step"]) for row in rows]
    assert steps == [lines[0]["step"], lines[1]["step"], lines[1]["step"]]
    assert float(rows[-1]["test_acc"]) == pytest.approx(lines[-1]["test_acc"])
    offline = sorted(Path(p).name for p in glob.glob(str(run_dir / "wandb" / "offline-run-*")))
    assert len(offline) == 2 and all(name.endswith("-run") for name in offline)
    assert events.exists()  # the first lifetime's file is kept beside the second's


def test_plot_overlays_local_runs_from_their_metrics(env: Env, tmp_path: Path) -> None:
    ids = []
    for lr in ("0.2", "0.05"):
        proc = env.cli("launch", "digits-fast", *QUICK, "--set", f"lr={lr}", "-d", timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        ids.append(proc.stdout.strip())
    for run_id in ids:
        proc = env.cli("logs", run_id, "--follow", timeout=400)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = {r["id"]: r for r in env.runs()}
    assert [runs[i]["state"] for i in ids] == ["succeeded", "succeeded"]

    # The event files are in the run folders under SPOTRUN_HOME/runs, where
    # `tensorboard --logdir SPOTRUN_HOME/runs` finds them.
    for run_id in ids:
        run_dir = env.home / "runs" / run_id
        points = _tensorboard_scalars(run_dir, "test_acc")
        assert points == [
            (line["step"], pytest.approx(line["test_acc"])) for line in _metrics(run_dir)
        ]

    def plotted(*args: str) -> dict[str, Any]:
        return json.loads(env.cli("plot", *ids, "--json", *args, check=True).stdout)

    by_step = plotted()
    assert by_step["metric"] == "test_acc" and by_step["x"] == "step"
    for curve, run_id in zip(by_step["curves"], ids):
        lines = _metrics(env.home / "runs" / run_id)
        assert curve["run"] == run_id and curve["name"] == runs[run_id]["name"]
        assert curve["x"] == [line["step"] for line in lines]
        assert curve["y"] == [line["test_acc"] for line in lines]
    by_time = plotted("--metric", "train_loss", "--x", "time")
    for curve, run_id in zip(by_time["curves"], ids):
        lines = _metrics(env.home / "runs" / run_id)
        assert curve["x"] == [line["elapsed_s"] for line in lines]
        assert curve["y"] == [line["train_loss"] for line in lines]
    by_cost = plotted("--x", "cost")  # the local cloud costs nothing
    assert all(x == 0.0 for curve in by_cost["curves"] for x in curve["x"])

    png = tmp_path / "curves.png"
    proc = env.cli("plot", ids[0][:6], ids[1], "-o", str(png))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {png}: test_acc against step for 2 run(s)" in proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    typo = env.cli("plot", ids[0], "--metric", "test_ac", "-o", str(png))
    assert typo.returncode == 2 and "did you mean 'test_acc'" in typo.stderr
    bad_path = env.cli("plot", ids[0], "-o", str(tmp_path / "curves.jpg"))
    assert bad_path.returncode == 2 and "ending in .png" in bad_path.stderr
    unknown = env.cli("plot", "no-such-run", "-o", str(png))
    assert unknown.returncode != 0 and "no run or sweep named 'no-such-run'" in unknown.stderr
