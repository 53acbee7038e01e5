"""Your own command's parts, run for real on this machine: task files, .gitignore, the workdir
push over a real Runner (bash and copies), the wrapper's setup and signal delivery."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from spotrun.core.errors import UsageError
from spotrun.core.jobspec import JobSpec, RecipeCall
from spotrun.jobs import gitignore
from spotrun.jobs.own_command import build_job, parse_envs, read_env_file
from spotrun.jobs.taskfile import load_task
from spotrun.jobs.workdir import check_size, list_files
from spotrun.remote.jobprep import restore_checkpoints
from spotrun.remote.local import LocalRunner
from spotrun.remote.push import push_workdir
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------ task files
def _task(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


def test_task_file_full(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    task = load_task(
        _task(
            tmp_path,
            "name: t1\nresources: {gpus: 0, spot: false, disk_gb: 40}\nworkdir: proj\n"
            "setup: echo hi\nrun: python t.py\nenvs: {LR: 0.1, DEBUG: true}\n"
            "outputs: [results]\ncheckpoint_dir: ckpt\nmax_cost: 2\nmax_hours: 1.5\n",
        )
    )
    assert task.workdir == str(tmp_path / "proj")  # relative to the task file
    assert task.env_strings() == {"LR": "0.1", "DEBUG": "true"}
    assert task.resources.as_flags() == {"gpus": 0, "spot": False, "disk_gb": 40}
    assert (task.max_cost, task.max_hours) == (2, 1.5)


def test_task_data_values(tmp_path: Path) -> None:
    def data(value: str) -> str | None:
        return load_task(_task(tmp_path, f"run: x\ndata: {value!r}\n")).data

    assert data("s3://my-sets/imagenet/") == "s3://my-sets/imagenet"
    assert data("snapshot:snap-0123456789abcdef0/sets") == "snapshot:snap-0123456789abcdef0/sets"
    assert data("sets/pets") == str(tmp_path / "sets" / "pets")  # relative to the task file
    assert data("/abs/pets") == "/abs/pets" and data("  ") is None
    for bad, message in [("s3://Bad_Bucket/x", "not an S3 bucket"), ("snapshot:snap-1", "id")]:
        with pytest.raises(UsageError, match=message):
            data(bad)
    with pytest.raises(ValidationError, match="data: only for your own command"):
        JobSpec(recipe=RecipeCall(name="digits-fast"), data="s3://my-sets/x")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("run: x\nrecources: {gpus: 1}\n", ["unknown key 'recources'"]),
        ("run: x\nresources: {gpu: 1}\n", ["unknown key 'resources.gpu'"]),
        ("run: x\nresources: {gpus: many}\n", ["resources.gpus", "integer"]),
        ("run: x\nmax_cost: free\n", ["max_cost", "number"]),
        ("run: '  '\n", ["run", "empty"]),
        ("name: t\n", ["'run' is required"]),
        ("- run: x\n", ["must be a mapping"]),
        ("run: [unclosed\n", ["not valid YAML"]),
    ],
)
def test_task_file_errors(tmp_path: Path, text: str, fragments: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        load_task(_task(tmp_path, text))
    for fragment in fragments:
        assert fragment in caught.value.message, caught.value.message


def test_env_flags_and_empty_command() -> None:
    assert parse_envs(["A=1", "B=x=y", "A=2"]) == {"A": "2", "B": "x=y"}
    for bad in ("A", "1A=2", "SPOTRUN_RUN_ID=x"):
        with pytest.raises(UsageError):
            parse_envs([bad])
    with pytest.raises(UsageError, match="empty"):
        build_job("   ", workdir_max_mb=1)
    with pytest.raises(UsageError, match="output '../up' must be a path inside"):
        build_job("x", outputs=["../up"], workdir_max_mb=1)
    for outside in ("/root/ckpt", "../ckpt", "."):
        with pytest.raises(UsageError, match="inside the workdir"):
            build_job("x", checkpoint_dir=outside, workdir_max_mb=1)


def test_env_files_read_key_value_lines_and_refuse_what_is_not(tmp_path: Path) -> None:
    path = tmp_path / "job.env"
    path.write_text("# a comment\n\nWANDB_PROJECT=p\n  URL=http://x/?a=b  \nWANDB_PROJECT=q\n")
    assert read_env_file(str(path)) == {"WANDB_PROJECT": "q", "URL": "http://x/?a=b"}
    for text, message in (
        ("OK=1\nnot a pair\n", "line 2: not KEY=VALUE"),
        ("1A=2\n", "line 1: not KEY=VALUE"),
        ("SPOTRUN_RUN_ID=x\n", "set by spotrun itself"),
    ):
        path.write_text(text)
        with pytest.raises(UsageError, match=message):
            read_env_file(str(path))
    with pytest.raises(UsageError, match="cannot read it"):
        read_env_file(str(tmp_path / "missing.env"))


# ------------------------------------------------------------------ .gitignore
def _tree(root: Path) -> None:
    for rel in (
        "a.py",
        "build/x.o",
        "data/big.bin",
        "data/keep.txt",
        "sub/b.log",
        "sub/c.py",
        "sub/deep/d.tmp",
        "notes/README",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / ".gitignore").write_text("# comment\nbuild/\ndata/*\n!data/keep.txt\n*.log\n")
    (root / "sub" / ".gitignore").write_text("/deep/\n!b.log\n")


def test_gitignore_walk_agrees_with_git(tmp_path: Path) -> None:
    _tree(tmp_path / "plain")
    ours = sorted(gitignore.walk(tmp_path / "plain"))
    assert ours == [
        ".gitignore",
        "a.py",
        "data/keep.txt",
        "notes/README",
        "sub/.gitignore",
        "sub/b.log",
        "sub/c.py",
    ]
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    _tree(repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert [f.path for f in list_files(repo)] == ours  # git's own answer, the same files


def test_workdir_size_limit_names_the_largest(tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.bin").write_bytes(b"\0" * 1_500_000)
    (tmp_path / "train.py").write_text("print(1)\n")
    files = list_files(tmp_path)
    assert check_size(tmp_path, files, 2.0) == 1_500_009
    with pytest.raises(UsageError) as caught:
        check_size(tmp_path, files, 1.0)
    message = caught.value.message
    assert "over the 1.0 MB limit" in message and "weights/ 1.5 MB" in message, message
    assert "weights/model.bin 1.5 MB" in message


# ------------------------------------------------------------------ push
def test_push_is_incremental(tmp_path: Path) -> None:
    src, dst, state = tmp_path / "src", tmp_path / "dst", tmp_path / "state"
    _tree(src)
    runner = LocalRunner()
    first = push_workdir(runner, src, list_files(src), str(state), str(dst))
    assert sorted(first.sent) == sorted(gitignore.walk(src)) and first.unchanged == 0
    assert (dst / "sub" / "c.py").read_text() == "sub/c.py"
    assert not (dst / "build").exists() and not (dst / "data" / "big.bin").exists()

    (dst / "made-by-job.txt").write_text("mine")  # the job's own files are left alone
    again = push_workdir(runner, src, list_files(src), str(state), str(dst))
    assert again.sent == [] and again.deleted == [] and again.archive_bytes == 0

    time.sleep(1.1)  # a new whole-second mtime
    (src / "a.py").write_text("changed")
    (src / "notes" / "README").unlink()
    (dst / "sub" / "c.py").write_text("edited on the instance")  # sent again: it differs
    third = push_workdir(runner, src, list_files(src), str(state), str(dst))
    assert sorted(third.sent) == ["a.py", "sub/c.py"] and third.deleted == ["notes/README"]
    assert (dst / "a.py").read_text() == "changed" and not (dst / "notes" / "README").exists()
    assert (dst / "sub" / "c.py").read_text() == "sub/c.py"
    assert (dst / "made-by-job.txt").read_text() == "mine"


def test_checkpoints_restored_only_on_a_fresh_instance(tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "remote"
    (local / "checkpoints").mkdir(parents=True)
    (local / "checkpoints" / "state.json").write_text('{"step": 3}')
    assert restore_checkpoints(LocalRunner(), local, str(remote)) == 1
    assert (remote / "checkpoints" / "state.json").read_text() == '{"step": 3}'
    (remote / "checkpoints" / "state.json").write_text('{"step": 5}')  # newer, on the instance
    assert restore_checkpoints(LocalRunner(), local, str(remote)) == 0
    assert (remote / "checkpoints" / "state.json").read_text() == '{"step": 5}'


# ------------------------------------------------------------------ the wrapper
def _wrap(run_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "spotrun", "agent", "wrap", "--run-dir", str(run_dir), *args],
        env=env,
        stdout=subprocess.DEVNULL,
    )


SAVER = (
    "import os, signal, sys, time\n"
    "def save(signum, frame):\n"
    "    open(os.path.join(os.environ['CK'], 'saved'), 'w').write(str(signum))\n"
    "    sys.exit(7)\n"
    "signal.signal(signal.SIGTERM, save)\n"
    "open('ready', 'w').close()\n"
    "time.sleep(60)\n"
)


def test_wrapper_setup_once_and_sigterm_reaches_the_script(tmp_path: Path) -> None:
    run_dir, work = tmp_path / "run", tmp_path / "work"
    work.mkdir()
    (work / "saver.py").write_text(SAVER)
    setup = tmp_path / "setup.sh"
    setup.write_text("echo setting up; echo x >> setups\n")
    ckpt = work / "ckpt"
    os.environ["CK"] = str(ckpt)
    try:
        # bash stays the parent here (two commands): the signal must reach python through it
        wrapper = _wrap(
            run_dir,
            f"--cwd={work}",
            f"--setup={setup}",
            f"--checkpoint-dir={ckpt}",
            "--",
            "bash",
            "-c",
            f"{sys.executable} saver.py; echo after",
        )
        wait_for(lambda: (work / "ready").exists(), timeout=30, what="the script to start")
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=30) != 0
    finally:
        del os.environ["CK"]
    assert (run_dir / "checkpoints" / "saved").read_text() == str(int(signal.SIGTERM))
    assert ckpt.is_symlink() and ckpt.resolve() == (run_dir / "checkpoints").resolve()
    exit_info = json.loads((run_dir / "exit.json").read_text())
    assert exit_info["phase"] == "run"
    assert "setting up" in (run_dir / "setup.log").read_text()
    # Started again on the same instance: the setup does not run twice.
    (work / "ready").unlink()
    again = _wrap(run_dir, f"--cwd={work}", f"--setup={setup}", "--", "true")
    assert again.wait(timeout=30) == 0
    assert (work / "setups").read_text() == "x\n"


def test_wrapper_failing_setup_stops_before_the_job(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    setup = tmp_path / "setup.sh"
    setup.write_text("set -e\necho step one\necho 'no such package: foo' >&2\nexit 4\n")
    code = _wrap(run_dir, f"--setup={setup}", "--", "touch", str(tmp_path / "ran")).wait(30)
    assert code == 4 and not (tmp_path / "ran").exists()
    assert json.loads((run_dir / "exit.json").read_text())["phase"] == "setup"
    assert "no such package: foo" in (run_dir / "setup.log").read_text()
