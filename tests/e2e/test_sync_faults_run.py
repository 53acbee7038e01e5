"""A whole run in the lab whose job writes what this machine cannot hold and swaps its files for
links to /etc (issue 38, points 1 and 4): the run succeeds on its one instance, everything
else comes home, what could not is listed, and nothing of the instance's /etc is copied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spotlab import Lab
from tests.conftest import Env
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

LONG = "n" * 251 + ".bin"  # 255 bytes: the instance's limit, and this machine's
DEEP = "/".join(["d" * 200] * 21)  # 4220 bytes: deeper than PATH_MAX here

# Phase 1 writes a folder and waits for `spotrun exec` to say go (once the folder is home);
# phase 2 makes it a file, writes a path too deep, and swaps two files with links to /etc
# while polls run.
JOB = f"""set -e
cd "$SPOTRUN_RUN_DIR"
echo long > {LONG}
echo ok > ok.txt
mkdir flip && echo one > flip/inner.txt
echo mine > swap.txt
echo mine > swap.log
while [ ! -e go ]; do sleep 0.1; done
rm -r flip && echo now-a-file > flip
(for part in $(echo {DEEP} | tr / ' '); do mkdir $part && cd $part; done; echo deep > leaf.txt)
for i in $(seq 60); do
  ln -sfn /etc swap.txt.new && mv -T swap.txt.new swap.txt
  ln -sfn /etc/passwd swap.log.new && mv -T swap.log.new swap.log
  sleep 0.05
  echo mine > swap.txt.new && mv -T swap.txt.new swap.txt
  printf 'mine\nmore\n' > swap.log.new && mv -T swap.log.new swap.log
  sleep 0.05
done
echo done > done.txt
"""


def _status(env: Env, run_id: str) -> dict[str, Any]:
    return dict(json.loads(env.cli("status", run_id, "--json", check=True).stdout))


def test_a_job_writing_what_cannot_come_home_runs_on_its_one_instance(
    aws_env: Env, lab: Lab, tmp_path: Path
) -> None:
    env = aws_env
    script = tmp_path / "job.sh"
    script.write_text(JOB)
    run_id = env.cli(
        "launch",
        "--cmd",
        f"bash {script.name}",
        "--workdir",
        str(tmp_path),
        "--cloud",
        "aws",
        "-d",
        check=True,
    ).stdout.strip()
    run_dir = env.home / "runs" / run_id
    wait_for(
        (run_dir / "flip" / "inner.txt").exists, timeout=120, what="the job's first files home"
    )
    env.cli("exec", run_id, "--cmd", 'touch "$SPOTRUN_RUN_DIR/go"', check=True)
    wait_for(
        lambda: env.run_state(run_id) in ("succeeded", "failed", "stopped"),
        timeout=180,
        what="the run to end",
    )
    status = _status(env, run_id)
    events = [e["message"] for e in status["events"]]
    assert status["state"] == "succeeded", (status["message"], events)
    assert len(status["instances"]) == 1 and len(lab.instances(run_id)) == 1, events

    assert (run_dir / LONG).read_text() == "long\n"
    assert (run_dir / "ok.txt").read_text() == "ok\n"
    assert (run_dir / "done.txt").read_text() == "done\n"
    assert (run_dir / "flip" / "inner.txt").read_text() == "one\n"
    # What could not come home: one event each, the final sync's list, and `spotrun status`.
    # (A swap file listed plain and a link when fetched is listed too, as not copied.)
    missing = status["not_home"]
    assert {"flip", f"{DEEP}/leaf.txt"} <= set(missing), (missing, events)
    swapped = set(missing) - {"flip", f"{DEEP}/leaf.txt"}
    assert all(p.startswith("swap") and "was not copied" in missing[p] for p in swapped), missing
    assert sum("'flip' cannot be written here" in e for e in events) == 1, events
    assert any(f"{len(missing)} file(s) could not come home" in e for e in events), events
    shown = env.cli("status", run_id, check=True).stdout
    assert f"not home  {len(missing)} file(s)" in shown, shown
    assert "a folder here has its name" in shown and "too long here" in shown, shown

    passwd = Path("/etc/passwd").read_bytes()
    for path in run_dir.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file() and path.name.startswith("swap"):
            assert passwd not in path.read_bytes() and b"root:" not in path.read_bytes(), path
    assert not (run_dir / "swap.txt").is_dir()
    assert not (run_dir / "swap.txt" / "passwd").exists()
