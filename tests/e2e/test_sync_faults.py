"""Sync from a lab host when this machine cannot write what the instance holds, and when the
job swaps its files for links (issue 38, points 1 and 4): the laptop's problems stay the
laptop's (the file is skipped and remembered, the pull goes on), and nothing outside the run
folder on the instance is ever copied home."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.remote import fetch
from spotrun.remote.runner import BytesResult, CommandResult, Runner
from spotrun.remote.sync import not_home, pull_run_dir
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

RUN_ID = "syncfault0001"
REMOTE = "/root/.spotrun/runs/" + RUN_ID
SECRET = "outside-the-run-folder"


@pytest.fixture
def host(aws_env: Env, lab: Lab) -> Iterator[tuple[Runner, Host]]:
    with one_instance(aws_env.home, lab, RUN_ID) as both:
        yield both


def _sh(runner: Runner, command: str) -> None:
    runner.run(command, timeout_s=60).check(command[:60])


class SwapAfterPoll:
    """The real runner to the host; `swap` runs there right after the first command (the
    poll's listing): a job that replaces a listed file between the listing and the copy."""

    def __init__(self, runner: Runner, swap: str) -> None:
        self.runner = runner
        self.swap: str | None = swap

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        return self.runner.run(command, timeout_s=timeout_s)

    def run_bytes(self, command: str, *, timeout_s: float | None = None) -> BytesResult:
        result = self.runner.run_bytes(command, timeout_s=timeout_s)
        if self.swap is not None:
            swap, self.swap = self.swap, None
            _sh(self.runner, swap)
        return result

    def put(self, local: Path, remote: str) -> None:
        self.runner.put(local, remote)

    def get(self, remote: str, local: Path) -> None:
        self.runner.get(remote, local)

    def close(self) -> None:
        self.runner.close()


def test_names_and_paths_this_machine_cannot_write_are_skipped_and_remembered(
    host: tuple[Runner, Host], tmp_path: Path
) -> None:
    runner, machine = host
    local = tmp_path / "run"
    long_name = "n" * 251 + ".bin"  # 255 bytes: fine there; with '.part' too long here
    deep = "/".join(["d" * 200] * 21)  # 4220 bytes: deeper than this machine's PATH_MAX
    _sh(
        runner,
        f"mkdir -p {REMOTE}/flip && cd {REMOTE} && echo one > flip/inner.txt && "
        f"echo long > {long_name} && echo ok > ok.txt && echo f > grows-up",
    )
    first = pull_run_dir(runner, REMOTE, local, final=False)
    assert sorted(first.fetched) == sorted(["flip/inner.txt", long_name, "ok.txt", "grows-up"])
    assert (local / long_name).read_text() == "long\n"

    # A folder becomes a file, a file becomes a folder, a path deeper than PATH_MAX here.
    _sh(
        runner,
        f"cd {REMOTE} && rm -r flip && echo now-a-file > flip && rm grows-up && "
        "mkdir grows-up && echo in > grows-up/x && echo fresh > fresh.txt && "
        # one folder at a time: the whole path is too long for one mkdir there too
        f"for part in $(echo {shlex.quote(deep)} | tr / ' '); do mkdir $part && cd $part; done && "
        "echo deep > leaf.txt",
    )
    second = pull_run_dir(runner, REMOTE, local, final=True)
    assert second.fetched == ["fresh.txt"]
    assert (local / "fresh.txt").read_text() == "fresh\n"
    assert (local / "flip" / "inner.txt").read_text() == "one\n"  # what came before stays
    reasons = dict(second.unsaved)
    assert sorted(reasons) == sorted(["flip", "grows-up/x", f"{deep}/leaf.txt"])
    assert "folder" in reasons["flip"] and "too long" in reasons[f"{deep}/leaf.txt"]
    assert not_home(local) == reasons
    assert not list(local.rglob("*.part"))

    # Remembered: the next pull reports nothing new; once the folder in its way here is
    # moved aside, the file comes home and leaves the list of what could not.
    assert pull_run_dir(runner, REMOTE, local, final=False).unsaved == []
    (local / "flip").rename(local / "flip.before")
    again = pull_run_dir(runner, REMOTE, local, final=False)
    assert again.fetched == ["flip"] and again.unsaved == []
    assert (local / "flip").read_text() == "now-a-file\n"
    assert sorted(not_home(local)) == sorted(["grows-up/x", f"{deep}/leaf.txt"])
    assert machine.path(f"{REMOTE}/ok.txt").read_text() == "ok\n"


@pytest.mark.parametrize(
    "swap",
    [
        "rm listed && ln -s /root/outside/secret.txt listed",  # the file itself
        "mv sub sub.old && ln -s /root/outside sub",  # a folder on its path
        "rm listed && ln -s /root/outside listed",  # a file swapped for a link to a folder
        "rm listed && mkfifo listed",  # not a plain file at all: never waited on
    ],
)
def test_a_listed_file_swapped_for_a_link_is_never_followed(
    host: tuple[Runner, Host], tmp_path: Path, swap: str
) -> None:
    runner, _ = host
    local = tmp_path / "run"
    _sh(
        runner,
        f"mkdir -p /root/outside {REMOTE}/sub && echo {SECRET} > /root/outside/secret.txt && "
        f"cd {REMOTE} && echo mine > listed && echo mine > sub/secret.txt && echo ok > ok.txt",
    )
    pulled = pull_run_dir(
        SwapAfterPoll(runner, f"cd {REMOTE} && {swap}"), REMOTE, local, final=False
    )
    assert "ok.txt" in pulled.fetched
    for path in local.rglob("*"):
        assert path.is_dir() or SECRET not in path.read_text(errors="replace"), path
    swapped = "sub/secret.txt" if "sub" in swap.split("&&")[0] else "listed"
    assert swapped not in pulled.fetched
    assert swapped in dict(pulled.unsaved) and swapped in not_home(local)


def test_a_file_larger_than_a_block_comes_whole(
    host: tuple[Runner, Host], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, machine = host
    monkeypatch.setattr(fetch, "BLOCK_BYTES", 4096)
    local = tmp_path / "run"
    _sh(runner, f"mkdir -p {REMOTE} && head -c 10000 /dev/urandom > {REMOTE}/model.pt")
    pulled = pull_run_dir(runner, REMOTE, local, final=False)
    assert pulled.fetched == ["model.pt"] and pulled.whole_bytes == 10000
    assert (local / "model.pt").read_bytes() == machine.path(f"{REMOTE}/model.pt").read_bytes()
