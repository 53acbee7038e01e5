"""A running node of a multi-node run, as the tests of node order and of cluster pieces need."""

from __future__ import annotations

from spotrun.cloud.base import Instance


def node_instance(iid: str, private: str, public: str | None = None) -> Instance:
    return Instance(
        id=iid,
        run_id="r1",
        provider="aws",
        instance_type="p4d.24xlarge",
        region="us-east-1",
        zone="us-east-1a",
        market="spot",
        state="running",
        address=public or private,
        private_address=private,
    )
