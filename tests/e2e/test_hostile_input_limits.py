"""Hostile files and limits that overflow, through the real CLI (issue 38, points 9, 10, 11):
one error line naming the file or the flag, exit 2, nothing launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Env
from tests.e2e.test_bad_input import assert_one_line_error

DEEP = "[" * 100_000 + "]" * 100_000
LONG_NUMBER = "7" * 5_000


@pytest.mark.parametrize(
    ("config", "fragments"),
    [
        (f"bogus = {DEEP}\n", ["config.toml", "nested too deeply"]),
        (f"[aws]\nroot_volume_gb = {LONG_NUMBER}\n", ["config.toml", "more than 4300 digits"]),
        ("[aws]\nssh_timeout_s = 1e400\n", ["config.toml", "aws.ssh_timeout_s", "finite"]),
        ("[aws]\nssh_timeout_s = 1e300\n", ["config.toml", "aws.ssh_timeout_s"]),
        ("[aws]\nroot_volume_gb = 10000000\n", ["config.toml", "aws.root_volume_gb"]),
        ("[aws]\nexpires_after_hours = 1e308\n", ["config.toml", "aws.expires_after_hours"]),
    ],
)
def test_a_hostile_config_is_one_error_line(env: Env, config: str, fragments: list[str]) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text(config)
    proc = env.cli("launch", "digits-fast", "-d")
    assert_one_line_error(proc, 2, *fragments)


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        (f"run: echo hi\nenvs: {{A: {DEEP}}}\n", ["task.yaml", "nested too deeply"]),
        (f"run: echo hi\nmax_hours: {LONG_NUMBER}\n", ["task.yaml", "more than 4300 digits"]),
        ("run: echo hi\nmax_hours: 1.0e+308\n", ["task.yaml", "max_hours"]),
    ],
)
def test_a_hostile_task_file_is_one_error_line(
    env: Env, tmp_path: Path, body: str, fragments: list[str]
) -> None:
    task = tmp_path / "task.yaml"
    task.write_text(body)
    proc = env.cli("launch", str(task), "-d")
    assert_one_line_error(proc, 2, *fragments)
    assert env.runs() == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--max-hours", "1e308"], "max_hours"),
        (["--max-hours", "9000"], "max_hours"),
        (["--set", "threads=99999999"], "--set threads=99999999: more than 1,024"),
        (["--name", "abc\n"], "a run name is"),
    ],
)
def test_an_overflowing_limit_or_a_name_with_a_newline_is_refused(
    env: Env, args: list[str], fragment: str
) -> None:
    proc = env.cli("launch", "digits-fast", "-d", *args)
    assert_one_line_error(proc, 2, fragment)
    assert env.runs() == []


def test_an_idle_stop_beyond_a_year_is_refused(env: Env) -> None:
    proc = env.cli("controller", "up", "--on", "aws", "--idle-stop", "9" * 400 + "h")
    assert_one_line_error(proc, 2, "--idle-stop", "more than a year")
    assert not (env.home / "remote.json").exists()
