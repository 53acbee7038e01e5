"""The controller host's pinned keys (SPOTRUN_HOME/remote/known_hosts) when damaged: every
connection is refused with one line naming the file, and nothing is pinned again (issue 38,
point 12). The real ssh binary against a lab host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spotlab import Lab
from spotrun.core.errors import LocalFileError
from spotrun.remote.ssh import SshRunner
from spotrun.remote_controller import connection as hostrec
from spotrun.remote_controller.record import SshTarget
from spotrun.remote_controller.ssh_probe import probe
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

RUN_ID = "ctlpins00001"


@pytest.fixture
def runner(aws_env: Env, lab: Lab) -> Iterator[SshRunner]:
    with one_instance(aws_env.home, lab, RUN_ID) as (made, _):
        assert isinstance(made, SshRunner)
        yield made


@pytest.mark.parametrize(
    "damage",
    [
        b"127.0.0.9 ssh-ed25519\n",  # a line cut short
        b"127.0.0.9 ssh-ed25519 !!!not-base64!!!\n",
        b"\xff\xfe not text\n",
        None,  # a folder where the file goes
    ],
)
def test_a_damaged_known_hosts_refuses_and_pins_nothing(
    aws_env: Env, runner: SshRunner, damage: bytes | None
) -> None:
    home = aws_env.home
    target = SshTarget(runner.user, runner.host, runner.port)
    key = str(runner.key_file)
    assert probe(home, target, key, first_use=True)  # pins the host's key: it answers
    path = hostrec.known_hosts(home)
    assert hostrec.pinned_keys(home, target)
    path.unlink()
    if damage is None:
        path.mkdir()
    else:
        path.write_bytes(damage)
    other = SshTarget(runner.user, "127.0.0.1", runner.port)
    for attempt in (
        lambda: probe(home, target, key, first_use=True),
        lambda: hostrec.repin(home, target, other),
        lambda: hostrec.pinned_keys(home, target),
    ):
        with pytest.raises(LocalFileError) as refused:
            attempt()
        line = refused.value.user_message()
        assert str(path) in line and "connection refused" in line and "\n" not in line
    if damage is None:
        assert path.is_dir() and not list(path.iterdir())
    else:
        assert path.read_bytes() == damage  # nothing pinned
