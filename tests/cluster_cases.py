"""Bad multi-node input that launch and sweep both refuse before anything is made."""

from __future__ import annotations

from typing import Any

BAD: list[tuple[dict[str, Any], str, str]] = [  # (resources, recipe, what the refusal says)
    ({"nodes": 17}, "digits-fast", "--nodes 17 is more than the 16 instances"),
    (
        {"nodes": 2, "instance_type": "t3.micro"},
        "digits-fast",
        "instance type t3.micro cannot join a cluster placement group",
    ),
    ({"nodes": 2}, "cifar10-fast", "recipe cifar10-fast declares itself single-node"),
    (
        {"nodes": 3, "instance_type": "c6i.large"},
        "digits-fast",
        "3 x c6i.large need 6 vCPUs, more than the account's quota 'All Standard",
    ),
]
