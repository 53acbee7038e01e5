"""The order of a multi-node run's nodes, and the check that torchrun kept it.

torch's c10d rendezvous numbers the nodes that join by sorting their addresses
(`--local-addr`), so spotrun orders a cluster's instances the same way: node 0 is the first
address (it hosts the rendezvous, its first process is rank 0, and it is the node spotrun syncs
checkpoints from). Each training process checks that torchrun's GROUP_RANK is the node rank
spotrun gave it, so a disagreement fails loudly instead of checkpointing on another node.

Pure rules over anything with an id and addresses: the controller (spotrun.control.cluster),
the AWS provider (`spotrun ssh --node`) and the trainer (spotrun.train.build) use them alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol, TypeVar

from spotrun.core.errors import UsageError
from spotrun.core.rundir import NODE_RANK_VAR


class Node(Protocol):
    """What the order needs of an instance (spotrun.cloud.base.Instance has it)."""

    @property
    def id(self) -> str: ...

    @property
    def address(self) -> str | None: ...

    @property
    def private_address(self) -> str | None: ...


N = TypeVar("N", bound=Node)


def node_address(node: Node) -> str:
    """The address the other nodes reach this one on (inside the cloud's network)."""
    address = node.private_address or node.address
    if not address:
        raise UsageError(f"instance {node.id} has no address the other nodes can reach")
    return address


def order(nodes: list[N]) -> list[N]:
    """The cluster's nodes in torch's c10d order: by address, as text (node 0 first)."""
    return sorted(nodes, key=lambda n: (node_address(n), n.id))


def check_node_rank(environ: Mapping[str, str] | None = None) -> None:
    """In a training process: torchrun's node number must be the one spotrun gave the node."""
    env = os.environ if environ is None else environ
    given, found = env.get(NODE_RANK_VAR), env.get("GROUP_RANK")
    if given is None or found is None or given == found:
        return
    raise UsageError(
        f"torchrun made this node number {found}, but spotrun started it as node {given}: "
        "rank 0 would not be on the node spotrun syncs checkpoints from",
        hint="the nodes' addresses must sort in node order (spotrun.core.node_order.order)",
    )
