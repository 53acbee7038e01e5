"""The controller's reading of an agent's self-termination record (spotrun.control.agent_end),
and the config key the agent no longer needs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from spotrun.control.agent_end import adopt_files, find_end
from spotrun.core.config import load_settings


def _record(folder: Path, instance_id: str, why: str, code: int | None = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"why": why, "reason": f"because {why}", "instance_id": instance_id}
    (folder / "self-terminated.json").write_text(json.dumps({**record, "exit_code": code}))


def test_only_the_current_instances_record_counts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _record(run_dir, "i-old", "job-ended")  # synced from an instance replaced since
    assert find_end(run_dir, {"i-new"}) is None
    _record(run_dir / "instances" / "i-new", "i-new", "no-progress", 75)
    end = find_end(run_dir, {"i-new"})
    assert end is not None and (end.why, end.exit_code) == ("no-progress", 75)
    (run_dir / "instances" / "i-new" / "self-terminated.json").write_text("{torn")
    assert find_end(run_dir, {"i-new"}) is None


def test_the_stored_files_replace_shorter_copies_only(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    stored = run_dir / "instances" / "i-1"
    _record(stored, "i-1", "job-ended")
    (stored / "exit.json").write_text('{"exit_code": 0}')
    (stored / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (stored / "job.log").write_text("short\n")
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')  # synced before the controller left
    (run_dir / "job.log").write_text("the longer log synced here\n")
    end = find_end(run_dir, {"i-1"})
    assert end is not None
    assert adopt_files(run_dir, end) == ["exit.json", "metrics.jsonl"]
    assert (run_dir / "metrics.jsonl").read_text().count("step") == 2
    assert (run_dir / "job.log").read_text() == "the longer log synced here\n"


def test_the_old_heartbeat_key_is_named_and_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config.toml").write_text("heartbeat_timeout_s = 60\n[aws]\nno_progress_s = 0\n")
    with caplog.at_level(logging.WARNING):
        settings = load_settings(tmp_path)
    assert settings.run.no_progress_s == 0.0
    assert "heartbeat_timeout_s no longer does anything" in caplog.text
