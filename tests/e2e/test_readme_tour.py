"""The README's tour runs as written on a fresh machine: every line of its `<!-- tour -->` block,
parsed from README.md, is run through bash in order, the real CLI on the local cloud, with the
data it needs served offline from ../shared/data (config.toml's data_mirror).

How each line is run is said below, per line, so a new tour line without a way to run it fails
here. Lines that follow something live (a run, a dashboard, a log) are run until they show it
and then get Ctrl-C, as a person would; `attach` gets a terminal of its own (a tmux pane) and
leaves with tmux's detach. `RUN` is a run's name, as the README says: the tour's first run for
`plot`, the shakespeare run for `sample`."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spotrun.core.rundir import PROGRESS_FILE
from tests.conftest import REPO, Env
from tests.data_server import serve_folder, shared_data
from tests.helpers import WAIT_SCALE, wait_for

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Run:
    """Run to its end; exit 0."""

    stdin: str = ""


@dataclass(frozen=True)
class Until:
    """Run until `text` shows in its output, then Ctrl-C (what the README says it does)."""

    text: str
    timeout: float = 300


@dataclass(frozen=True)
class Terminal:
    """Run in a terminal of its own until it attaches; leave with tmux's detach (Ctrl-b d)."""


HOW: dict[str, Run | Until | Terminal] = {
    "spotrun recipes": Run(),
    "spotrun recipes show cifar10-fast": Run(),
    "spotrun launch digits-fast": Until(" running "),
    "spotrun launch digits-fast -d --set epochs=400 --name long": Run(),
    "spotrun ls": Run(),
    "spotrun logs -f long": Until("epoch"),
    "spotrun attach long": Terminal(),
    "spotrun ssh long": Run(stdin="pwd\nexit\n"),
    "spotrun plot long RUN -o c.png": Run(),
    "tensorboard --logdir ~/.spotrun/runs --port 0": Until("http://"),
    "spotrun ui": Until("http://127.0.0.1:"),
    "spotrun status long": Run(),
    "spotrun stop long": Run(),
    "spotrun resume long --max-cost 5 -d": Run(),
    "spotrun rm long": Run(),
    "spotrun cost": Run(),
    "spotrun cost --by day --csv": Run(),
    "spotrun cost --plot cost.png": Run(),
    "spotrun train digits-fast --run-dir r": Until("epoch 1/"),
    "torchrun --nproc-per-node 2 -m spotrun train digits-fast --run-dir r2": Until("epoch 1/"),
    "spotrun methods": Run(),
    "spotrun data get tinyshakespeare": Run(),
    "spotrun launch shakespeare-fast": Until(" running "),
    "spotrun sample RUN --prompt 'ROMEO:'": Run(),
}


def tour_lines() -> list[str]:
    """The tour's commands, as written, without their comments and continuation comments."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- tour -->\n", 1)[1].split("<!-- /tour -->", 1)[0]
    lines = []
    for raw in block.splitlines():
        if raw.startswith("```") or not raw.strip() or raw.lstrip().startswith("#"):
            continue
        lines.append(re.split(r"\s+#\s", raw, maxsplit=1)[0].strip())  # as bash will read it
    return lines


def test_every_tour_line_has_a_way_to_run() -> None:
    lines = tour_lines()
    assert [line for line in lines if line not in HOW] == []
    assert "spotrun data get tinyshakespeare" in lines  # before the recipe that reads it
    assert lines.index("spotrun data get tinyshakespeare") < lines.index(
        "spotrun launch shakespeare-fast"
    )


class Tour:
    def __init__(self, env: Env, work: Path) -> None:
        self.env = env
        self.work = work
        home_dir = work / "user"  # `~` of the tour: ~/.spotrun is this test's SPOTRUN_HOME
        home_dir.mkdir()
        (home_dir / ".spotrun").symlink_to(env.home)
        venv_bin = str(Path(sys.executable).parent)
        self.vars = {**env.vars, "HOME": str(home_dir), "PATH": f"{venv_bin}:{os.environ['PATH']}"}

    def bash(self, line: str, **options: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", line],
            cwd=self.work,
            env=self.vars,
            text=True,
            start_new_session=True,  # Ctrl-C goes to the command's whole process group
            **options,
        )

    def run(self, line: str, how: Run) -> None:
        proc = self.bash(
            line, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        said, _ = proc.communicate(how.stdin, timeout=300 * WAIT_SCALE)
        assert proc.returncode == 0, f"{line} -> {proc.returncode}\n{said}"

    def until(self, line: str, how: Until) -> None:
        log = self.work / "until.log"
        with log.open("w") as sink:
            proc = self.bash(line, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_for(
                lambda: how.text in log.read_text() or proc.poll() is not None,
                timeout=how.timeout,
                what=f"{how.text!r} from {line}",
            )
            assert how.text in log.read_text(), f"{line} ended early:\n{log.read_text()}"
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120 * WAIT_SCALE)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        if line.startswith("spotrun "):  # torchrun prints its own traceback on Ctrl-C
            assert "Traceback" not in log.read_text(), log.read_text()

    def terminal(self, line: str) -> None:
        run_id = self.run_id(line.split()[-1])
        session = f"spotrun-{run_id}"
        tmux = ["tmux", "-L", "tour-terminal"]
        command = f"cd {shlex.quote(str(self.work))} && {line}; sleep 300"
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", "200", "-y", "40", command], env=self.vars
        )
        try:
            wait_for(lambda: self.clients(session) != "", what=f"{line} to attach")
            self.env.tmux("detach-client", "-s", f"={session}")
            wait_for(lambda: self.clients(session) == "", what=f"{line} to leave")
        finally:
            subprocess.run([*tmux, "kill-server"], env=self.vars)

    def clients(self, session: str) -> str:
        listed = self.env.tmux("list-clients", "-t", f"={session}", "-F", "#{client_pid}")
        return listed.stdout.strip()

    def runs(self) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = json.loads(
            self.env.cli("ls", "--all", "--json", check=True).stdout
        )
        return runs

    def run_id(self, name: str) -> str:
        (found,) = [r["id"] for r in self.runs() if r["name"] == name]
        return str(found)

    def name_of(self, recipe: str) -> str:
        (found,) = [r["name"] for r in self.runs() if r["recipe"] == recipe and r["name"] != "long"]
        return str(found)

    def stop_and_wait(self, name: str) -> None:
        self.env.cli("stop", name, check=True)
        wait_for(lambda: self.state(name) in ("stopped", "succeeded"), what=f"{name} to stop")

    def state(self, name: str) -> str:
        return str(json.loads(self.env.cli("status", name, "--json", check=True).stdout)["state"])


def test_the_readme_tour_runs_as_written(env: Env, tmp_path: Path) -> None:
    data = shared_data()
    tour = Tour(env, tmp_path)
    with serve_folder(data) as server:
        env.home.mkdir(parents=True, exist_ok=True)
        (env.home / "config.toml").write_text(f'data_mirror = "{server.url}"\n')
        try:
            for line in tour_lines():
                how = HOW[line]
                if "RUN" in line.split():
                    recipe = "shakespeare-fast" if " sample " in line else "digits-fast"
                    name = tour.name_of(recipe)
                    if recipe == "shakespeare-fast":  # sample reads a checkpoint: once it
                        # trains, a stop makes the trainer write one
                        progress = env.home / "runs" / tour.run_id(name) / PROGRESS_FILE
                        wait_for(progress.exists, timeout=300, what=f"{name} to train")
                        tour.stop_and_wait(name)
                    line = re.sub(r"\bRUN\b", name, line)
                if isinstance(how, Run):
                    tour.run(line, how)
                elif isinstance(how, Until):
                    tour.until(line, how)
                else:
                    tour.terminal(line)
                if line == "spotrun stop long":  # resume and rm want the stop to have ended
                    wait_for(lambda: tour.state("long") == "stopped", what="long to stop")
        finally:
            for run in tour.runs():
                if run["state"] not in ("succeeded", "failed", "stopped"):
                    env.cli("stop", run["id"])
    assert (tmp_path / "c.png").stat().st_size > 0 and (tmp_path / "cost.png").stat().st_size > 0
    assert (env.home / "data" / "tinyshakespeare.txt").is_file()
    assert "long" not in [r["name"] for r in tour.runs()]  # rm forgot it
