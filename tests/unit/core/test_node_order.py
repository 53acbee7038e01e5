"""The node order of a multi-node run (c10d's, by address) and the rank check each training
process makes (spotrun.core.node_order: the controller, the AWS provider and the trainer use it)."""

from __future__ import annotations

import pytest

from spotrun.core import node_order
from spotrun.core.errors import UsageError
from tests.unit.cluster_nodes import node_instance


def test_nodes_are_ordered_as_c10d_orders_them_by_address_text() -> None:
    # c10d sorts the joining nodes' addresses as strings: "10.0.0.10" before "10.0.0.9"
    a = node_instance("i-a", "10.0.0.9", public="3.3.3.3")
    b = node_instance("i-b", "10.0.0.10", public="1.1.1.1")
    assert [i.id for i in node_order.order([a, b])] == ["i-b", "i-a"]
    assert node_order.node_address(a) == "10.0.0.9"  # the private one, not the public


def test_a_node_that_torchrun_numbered_otherwise_fails_loudly() -> None:
    node_order.check_node_rank({"SPOTRUN_NODE_RANK": "1", "GROUP_RANK": "1"})
    node_order.check_node_rank({})  # not a spotrun cluster: nothing to check
    with pytest.raises(UsageError, match="torchrun made this node number 0"):
        node_order.check_node_rank({"SPOTRUN_NODE_RANK": "1", "GROUP_RANK": "0"})
