"""The lab: moto in server mode + real sshd hosts on loopback, an EC2 that runs jobs for real.

See spotlab/README.md for its API; `from spotlab import Lab`, or use the `lab` and
`aws_env` fixtures (spotlab/fixtures.py, registered in tests/conftest.py).
"""

from spotlab.lab import REGION, ZONES, Lab, MotoServer

__all__ = ["REGION", "ZONES", "Lab", "MotoServer"]
