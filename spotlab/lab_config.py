"""What spotrun sees of the lab: the environment that points boto3 at it (and nowhere else),
and the [aws] settings (config.toml) that name its image, subnets, bucket and ports."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotlab.front import CHECKIP_PATH
from spotlab.lab_iam import CONTROLLER_PROFILE, FAKE_CREDENTIALS, INSTANCE_PROFILE
from spotlab.regions import REGION, REGIONS

if TYPE_CHECKING:
    from spotlab.lab import Lab


class LabConfig:
    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def env(self) -> dict[str, str]:
        """Environment for spotrun processes: boto3 reaches the lab, and nothing else."""
        return {
            "AWS_ENDPOINT_URL": self.lab.front.url,
            "AWS_DEFAULT_REGION": REGION,
            **FAKE_CREDENTIALS,
            "AWS_EC2_METADATA_DISABLED": "true",  # this machine is no instance
            "AWS_CONFIG_FILE": str(self.lab.root / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.lab.root / "no-aws-credentials"),
        }

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The [aws] settings that point spotrun at the lab."""
        lab = self.lab
        aws: dict[str, Any] = {
            "region": REGION,
            "image_ssm_parameter": lab.image_parameter,
            # both regions' subnets: a launch uses those of its region
            "subnet_ids": [n.subnets[z] for n in lab.networks.values() for z in n.subnets],
            "regions": list(REGIONS),  # where gc looks
            "ssh_address": "private",
            # Asked only with ssh_address = "public": the front answers as checkip would.
            "caller_ip_url": lab.front.url + CHECKIP_PATH,
            "ssh_user": "root",
            "ssh_port": lab.hosts.ssh_port,
            # A host boots in a second or two, but on a loaded 2-core machine its sshd once took
            # over 30 s to answer (a fresh-clone suite run): a bound for load, not a test of it
            # (tests of the SSH wait set their own, e.g. test_aws_errors.py's 3 s).
            "ssh_timeout_s": 90.0,
            "python": sys.executable,
            "root_volume_gb": 30,
            "poll_s": 1.0,
            "max_attempts": 4,
            # torch's rendezvous store listens on every address of this machine: a port of the
            # lab's own, not torch's usual 29400 that other labs and torchruns here take too
            "rendezvous_port": lab.rendezvous_port,
            # instances get the role's credentials only through a profile, as on EC2
            "instance_profile": INSTANCE_PROFILE,
            "controller_instance_profile": CONTROLLER_PROFILE,
            "gpu_mismatch": "warn",  # the lab offers GPU types on hosts that have no GPU
        }
        if lab.bucket:
            aws["bucket"] = lab.bucket
        aws.update(overrides)
        return aws

    def write_config(self, home: Path, **overrides: Any) -> Path:
        home.mkdir(parents=True, exist_ok=True)
        settings = self.settings(**overrides)
        # a None override leaves the key out (spotrun's default: e.g. no instance profile)
        lines = ["[aws]"] + [f"{k} = {_toml(v)}" for k, v in settings.items() if v is not None]
        path = home / "config.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    @contextmanager
    def environ(self) -> Iterator[None]:
        """This process's os.environ pointed at the lab (for in-process provider calls)."""
        saved = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")
