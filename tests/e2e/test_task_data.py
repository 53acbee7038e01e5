"""A task file's `data`: your own code gets a data set staged (s3://) before it starts, finds it
in SPOTRUN_DATA_DIR, and bad data is refused at launch with nothing made."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for
from tests.unit.train.data.images import make_image_folder

pytestmark = pytest.mark.slow

# Counts the files the job sees under SPOTRUN_DATA_DIR and writes what it found as an output.
COUNT_FILES = """\
import json, os, pathlib
root = pathlib.Path(os.environ["SPOTRUN_DATA_DIR"])
files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
               if p.is_file() and ".spotrun-stage" not in p.parts)
pathlib.Path("results").mkdir(exist_ok=True)
pathlib.Path("results/seen.json").write_text(json.dumps({"root": str(root), "files": files}))
"""


def _task(folder: Path, data: str) -> Path:
    (folder / "proj").mkdir(parents=True, exist_ok=True)
    (folder / "proj" / "count.py").write_text(COUNT_FILES)
    task = folder / "task.yaml"
    task.write_text(
        f"name: counter\nworkdir: proj\nrun: {json.dumps(sys.executable + ' count.py')}\n"
        f"data: {data}\noutputs: [results]\nresources: {{gpus: 0}}\n"
    )
    return task


def _ended(env: Env, run_id: str) -> dict[str, Any]:
    def state() -> str:
        with Ledger(load_settings(env.home)) as ledger:
            return ledger.get_run(run_id).state.value

    wait_for(lambda: state() in ("succeeded", "failed", "stopped"), timeout=120, what="the end")
    return json.loads(env.cli("status", run_id, "--json", check=True).stdout)


def _image_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_task_gets_its_s3_data_staged_before_it_runs(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    env = aws_env
    folder = make_image_folder(tmp_path / "pets", per_class=3, per_class_test=1, size=8).root
    uri = f"s3://{lab.bucket}/sets/pets"
    env.cli("data", "push", str(folder), uri, "--shard-size", "1MB", check=True)

    run_id = env.cli(
        "launch", str(_task(tmp_path, uri + "/")), "--cloud", "aws", "-d", check=True
    ).stdout.strip()
    status = _ended(env, run_id)
    assert status["state"] == "succeeded", (status["message"], status["events"])
    seen = json.loads(
        (env.home / "runs" / run_id / "workdir" / "results" / "seen.json").read_text()
    )
    assert seen["root"] == f"/root/.spotrun/spotrun-data/{lab.bucket}/sets/pets"
    assert seen["files"] == _image_files(folder)
    log = env.cli("logs", run_id, check=True).stdout
    assert f"staging {uri}" in log and "(SPOTRUN_DATA_DIR)" in log
    assert status["staging"]["state"] == "done" and status["staging"]["stagings"] == 1


def test_bad_task_data_launches_nothing(aws_env: Env, lab: Lab, tmp_path: Path) -> None:
    env = aws_env
    here = tmp_path / "here"
    here.mkdir()
    cases = {
        f"s3://{lab.bucket}/never-pushed": ("aws", "nothing is stored under that prefix"),
        "s3://Bad_Name/x": ("aws", "is not an S3 bucket name"),
        "missing-folder": ("local", "does not exist"),
        str(here): ("aws", "the aws cloud's instances cannot see it"),
    }
    for i, (data, (cloud, message)) in enumerate(cases.items()):
        task = _task(tmp_path / f"case{i}", data)
        result = env.cli("launch", str(task), "--cloud", cloud, "-d")
        assert result.returncode == 2 and message in result.stderr, (data, result.stderr)
    assert lab.instances() == [] and env.runs() == []


def test_a_local_folder_is_used_in_place_on_the_local_cloud(env: Env, tmp_path: Path) -> None:
    folder = make_image_folder(tmp_path / "pets", per_class=2, per_class_test=1, size=8).root
    task = _task(tmp_path, str(Path("pets").joinpath()))  # relative to the task file
    run_id = env.cli("launch", str(task), "--cloud", "local", "-d", check=True).stdout.strip()
    status = _ended(env, run_id)
    assert status["state"] == "succeeded", (status["message"], status["events"])
    seen = json.loads(
        (env.home / "runs" / run_id / "workdir" / "results" / "seen.json").read_text()
    )
    assert seen == {"root": str(folder), "files": _image_files(folder)}
