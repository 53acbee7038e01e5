"""An always-on machine of the user's in the lab: where `spotrun controller up --on ssh://`
puts the controller.

It is a lab host (hosts.py: a real sshd in its own mount and PID space, its own /root and
/tmp) on an address of the lab's /22 that no instance gets (the fourth /24: the subnets take
the first three), with the lab's AWS endpoint and the lab user's credentials in every SSH
session's environment, as an always-on machine with its own AWS configuration has them. No
instance metadata: it is not an EC2 instance.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from spotlab.hosts import Host, HostSpec
from spotlab.lab import Lab, free_port, image_paths


def user_key(path: Path) -> str:
    """A new Ed25519 login key at `path` (OpenSSH format, mode 600); its public line."""
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def start_always_on_host(lab: Lab, authorized_key: str, root: Path) -> Host:
    """Start the machine (the caller stops it: `host.stop()` ends everything on it)."""
    assert lab.network is not None
    a, b = lab.network.cidr.split(".")[1:3]
    address = f"127.{a}.{int(b) + 3}.10"
    env = dict(lab.config.env())
    # the lab's paths of this machine mean nothing there: the host's own (absent) files
    env["AWS_CONFIG_FILE"] = "/root/.aws/config"
    env["AWS_SHARED_CREDENTIALS_FILE"] = "/root/.aws/credentials"
    spec = HostSpec(
        instance_id="always-on",
        address=address,
        port=free_port(address),
        authorized_key=authorized_key,
        env=env,
        image_paths=image_paths(),
    )
    host = Host(spec, root)
    host.start()
    host.wait_listening()
    return host
