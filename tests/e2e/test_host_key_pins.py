"""A host-key pin that exists but cannot be read or parsed refuses the connection with one line
naming the file (issue 38, point 12): it is never taken for "not pinned" and pinned again to
whatever key the host shows. Also: what this machine cannot write in a copy over SFTP is a
LocalFileError, never the instance's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab.hosts import Host
from spotrun.core.errors import LocalFileError, RemoteError
from spotrun.remote.runner import Runner
from spotrun.remote.ssh import SshRunner
from tests.conftest import Env
from tests.e2e.lab_instance import one_instance

RUN_ID = "pins00000001"


@pytest.fixture
def host(aws_env: Env, lab: Lab) -> Iterator[tuple[Runner, Host]]:
    with one_instance(aws_env.home, lab, RUN_ID) as both:
        yield both


def _text(content: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(content)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (_text("this is not a key\n"), "is not a host key"),
        (_text("ssh-ed25519 !!!not-base64!!!\n"), "is not a host key"),
        (_text("ssh-ed25519 AAAA\n"), "is not a host key"),
        (_text("ssh-unknown AAAAC3NzaC1lZDI1NTE5\n"), "is not a host key"),
        (_text(""), "is not a host key"),
        (_folder, "cannot be read"),
    ],
)
def test_a_damaged_pin_refuses_and_is_never_repinned(
    host: tuple[Runner, Host], spoil: Callable[[Path], None], said: str
) -> None:
    runner, _ = host
    assert isinstance(runner, SshRunner)
    runner.connect()  # pins the host's key
    pin = runner.pins.path(runner.instance_id)
    assert pin.read_text().startswith("ssh-ed25519 ")
    runner.close()
    spoil(pin)
    before = sorted((p.name, p.read_bytes() if p.is_file() else b"") for p in pin.parent.rglob("*"))
    with pytest.raises(LocalFileError) as refused:
        runner.run("true", timeout_s=30)
    line = refused.value.user_message()
    assert str(pin) in line and said in line and "connection refused" in line
    assert "delete it" in line and "\n" not in line
    after = sorted((p.name, p.read_bytes() if p.is_file() else b"") for p in pin.parent.rglob("*"))
    assert after == before  # nothing pinned in its place
    with pytest.raises(LocalFileError):
        runner.pins.known_hosts_line(runner.instance_id, runner.host, runner.port)


def test_an_sftp_copy_home_separates_this_machines_faults(
    host: tuple[Runner, Host], tmp_path: Path
) -> None:
    runner, _ = host
    remote = "/root/copy-test"
    long_name = "n" * 251 + ".bin"  # 255 bytes: with '.part' too long here
    runner.run(
        f"mkdir -p {remote}/tree && echo long > {remote}/{long_name} && echo t > {remote}/tree/t "
        f"&& ln -s /etc {remote}/tree/etc && ln -s /etc {remote}/link"
    ).check("writing files")
    runner.get(f"{remote}/{long_name}", tmp_path / long_name)
    assert (tmp_path / long_name).read_text() == "long\n"
    runner.get(f"{remote}/tree", tmp_path / "tree")
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["t"]  # the link left out
    with pytest.raises(RemoteError, match="is a link"):
        runner.get(f"{remote}/link", tmp_path / "link")
    (tmp_path / "taken").mkdir()
    with pytest.raises(LocalFileError, match="a folder here has its name"):
        runner.get(f"{remote}/tree/t", tmp_path / "taken")
    assert not list(tmp_path.rglob("*.part"))
