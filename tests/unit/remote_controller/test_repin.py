"""A started controller instance's new address gets the host key pinned for its old one
(OpenSSH's own known_hosts, read and written through ssh-keygen; hashed names too)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spotrun.remote_controller.connection import host_key_name, known_hosts, pinned_keys, repin
from spotrun.remote_controller.record import SshTarget


def _key(tmp: Path, name: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / name)], check=True
    )
    return " ".join((tmp / f"{name}.pub").read_text().split()[:2])


def test_the_pinned_key_moves_to_the_new_address_and_replaces_a_stale_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "remote").mkdir(parents=True)
    machine, stranger = _key(tmp_path, "machine"), _key(tmp_path, "stranger")
    old, new = SshTarget("ubuntu", "203.0.113.5", 22), SshTarget("ubuntu", "198.51.100.7", 22)
    path = known_hosts(home)
    path.write_text(f"{host_key_name(old)} {machine}\n{host_key_name(new)} {stranger}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert "203.0.113.5" not in path.read_text()  # hashed, as HashKnownHosts writes them
    assert pinned_keys(home, old) == [machine]
    assert repin(home, old, new)
    assert pinned_keys(home, new) == [machine]  # the stranger's key at that address is gone
    assert pinned_keys(home, old) == [machine]
    # off port 22 the name is [HOST]:PORT; nothing pinned: False (trust on first use then)
    assert host_key_name(SshTarget(None, "h", 2222)) == "[h]:2222"
    assert not repin(home, SshTarget(None, "192.0.2.1", 22), new)
