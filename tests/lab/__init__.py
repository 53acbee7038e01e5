"""The lab: moto in server mode + real sshd hosts on loopback, an EC2 that runs jobs for real.

See tests/lab/README.md for its API; `from tests.lab import Lab`, or use the `lab` and
`aws_env` fixtures (tests/lab/fixtures.py, registered in tests/conftest.py).
"""

from tests.lab.lab import REGION, ZONES, Lab, MotoServer

__all__ = ["REGION", "ZONES", "Lab", "MotoServer"]
