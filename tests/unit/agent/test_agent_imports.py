"""What runs on an instance beside the job imports only what it needs.

`spotrun agent ...` is started for every start, stop and exec of a job, on the local cloud and
on every instance; the instance's watcher runs beside every AWS job. Each test runs the real
entry point in a fresh interpreter (the real tmux server of the `env` fixture) and reads back
which heavy packages it loaded: a heavy import creeping back fails here, where a timing
assertion would only be noise on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from spotlab.harness import REPO, Env
from tests.helpers import WAIT_SCALE, wait_for

# libtmux is the agent's own way to drive tmux: the rest has no business in it
HEAVY = ("boto3", "botocore", "torch", "pydantic", "paramiko", "typer", "rich")

# Runs `python -m spotrun ARGS...` as the controller does, then says which heavy packages it
# loaded (atexit: the agent ends with sys.exit).
AGENT_PROBE = f"""
import atexit, json, runpy, sys
heavy = {HEAVY!r}
def said():
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))
    print("LOADED " + json.dumps(loaded), file=sys.stderr)
atexit.register(said)
sys.argv = ["spotrun", *sys.argv[1:]]
runpy.run_module("spotrun", run_name="__main__")
"""


def _agent(env: Env, *args: str) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", AGENT_PROBE, "agent", *args],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=REPO,
        timeout=120 * WAIT_SCALE,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return done.stdout, json.loads(line.removeprefix("LOADED "))


def test_agent_start_exec_and_stop_load_no_cloud_torch_or_cli_packages(
    env: Env, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    session = "spotrun-probe0000001"
    where = ["--session", session, "--run-dir", str(run_dir)]
    said, loaded = _agent(env, "start", *where, "--", "bash", "-c", "echo begun; sleep 600")
    assert json.loads(said) == {"session": session, "started": True}
    assert loaded == []
    assert session in env.sessions()
    # a second start finds the session (exactly its name: not a longer name's prefix)
    said, _ = _agent(env, "start", *where, "--", "true")
    assert json.loads(said)["started"] is False
    assert session + "x" not in env.sessions()

    said, loaded = _agent(env, "exec", *where, "--command", "echo from-exec")
    window = json.loads(said)["window"]
    assert loaded == []
    status = ["--session", session, "--run-dir", str(run_dir), "--window", window]
    wait_for(lambda: json.loads(_agent(env, "exec-status", *status)[0])["exit_code"] == 0)
    assert "from-exec" in json.loads(_agent(env, "exec-status", *status)[0])["output"]

    said, loaded = _agent(env, "stop", *where, "--grace", "30")
    assert loaded == []
    stopped = json.loads(said)
    assert stopped["alive"] is False and stopped["signalled"] is True
    assert stopped["exit_code"] == 143  # the job's SIGTERM, recorded by its wrapper
    assert session not in env.sessions()


WATCHER_PROBE = """
import json, sys
from pathlib import Path
from spotrun.agent.watcher import WatchConfig
from spotrun.cloud.aws.instance_watcher import aws_watcher
config = WatchConfig(run_dir=Path(sys.argv[1]), run_id="probe0000001",
                     metadata_url="http://127.0.0.1:9", no_progress_s=0.0)
watcher = aws_watcher(config, bucket="a-bucket", region="eu-west-1")
watcher.check_metadata()  # one round of polling: the metadata service, unreachable here
watcher.check_lifetime(0.0)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"boto3", "botocore"})))
"""


def _probe(script: str, folder: Path) -> Any:
    """Run a probe script in a fresh interpreter; what its last line says (JSON)."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120 * WAIT_SCALE,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_instance_watcher_polls_without_boto3(tmp_path: Path) -> None:
    """boto3 loads only when the watcher uploads or ends its instance (tests/e2e/
    test_spot_watcher.py drives both against the lab's S3 and EC2)."""
    assert _probe(WATCHER_PROBE, tmp_path) == []


PUSHER_PROBE = """
import json, sys
from spotrun.cloud.aws import checkpoints
code = checkpoints.main(["push", "--run-dir", sys.argv[1], "--run-id", "probe0000001",
                         "--bucket", "a-bucket", "--region", "eu-west-1"])
print(json.dumps([code, sorted({m.split(".")[0] for m in sys.modules} & {"boto3"})]))
"""


def test_the_checkpoint_pusher_loads_boto3_only_for_something_to_upload(tmp_path: Path) -> None:
    """A job that wrote nothing durable (no checkpoint, no metrics): the instance's pusher
    looks and uploads nothing, without boto3 (tests/e2e/test_aws_launch.py sees it upload)."""
    (tmp_path / "job.log").write_text("an own command's output\n")  # not a durable file
    assert _probe(PUSHER_PROBE, tmp_path) == [0, []]
