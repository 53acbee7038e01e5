"""Multi-node runs: N instances trained on together by torchrun, one process group.

spotrun does not coordinate the nodes itself: every node runs torchrun, which meets the others
in a c10d rendezvous (torch.distributed's elastic rendezvous, a TCP store) on the first node's
private address. spotrun's part is to say who the nodes are:

- the order: c10d's, by address (spotrun.core.node_order, shared with the provider and the
  trainer). Node 0 hosts the rendezvous, its first process is rank 0 (which writes checkpoints
  and metrics), and it is the node spotrun syncs the run folder from;
- processes per node: the instance's GPUs (one process on a CPU instance, with gloo);
- the network settings for NCCL on AWS (EFA through libfabric where the type has it), which
  `run.cluster_env` in config.toml overrides key by key.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from spotrun.cloud.base import Instance
from spotrun.core.node_order import node_address
from spotrun.core.rundir import (
    CLUSTER_LAYOUT_FILE,
    MASTER_ADDR_VAR,
    NNODES_VAR,
    NODE_RANK_VAR,
    NODES_DIR,
    TORCHRUN_ARGS_VAR,
)

# NCCL over EFA (libfabric's efa provider, GPUDirect RDMA where the type has it) on AWS.
EFA_ENV = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "NCCL_SOCKET_IFNAME": "^lo,docker",
}
# Without EFA, NCCL's sockets go over the VPC's network interface, never the loopback one.
TCP_ENV = {"NCCL_SOCKET_IFNAME": "^lo,docker"}


@dataclass(frozen=True)
class ClusterSpec:
    """One start of a multi-node job."""

    run_id: str
    nodes: list[Instance]  # in `order`
    procs_per_node: int
    port: int
    efa: bool

    @property
    def head(self) -> Instance:
        return self.nodes[0]

    def rendezvous_args(self, rank: int) -> list[str]:
        """torchrun's options on node `rank`: where and how the nodes meet."""
        return [
            f"--nnodes={len(self.nodes)}",
            f"--nproc-per-node={self.procs_per_node}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={node_address(self.head)}:{self.port}",
            f"--rdzv-id={self.run_id}",
            # Node 0 hosts the rendezvous store; on loopback (the lab) every address would look
            # like this machine's own, so who hosts is said, not guessed.
            f"--rdzv-conf=is_host={1 if rank == 0 else 0}",
            f"--local-addr={node_address(self.nodes[rank])}",
            # A failure restarts nothing inside torchrun: spotrun replaces the node and starts
            # the job again from the checkpoint.
            "--max-restarts=0",
        ]

    def torchrun_argv(self, python: str, rank: int, program: list[str]) -> list[str]:
        """torchrun on node `rank`, running `program` (a python module's argv: -m NAME ...)."""
        return [python, "-m", "torch.distributed.run", *self.rendezvous_args(rank), *program]

    def env(self, rank: int, overrides: dict[str, str]) -> dict[str, str]:
        """The node's environment: spotrun's node variables, NCCL settings, then overrides."""
        env = {
            NODE_RANK_VAR: str(rank),
            NNODES_VAR: str(len(self.nodes)),
            MASTER_ADDR_VAR: node_address(self.head),
            # your own command: `torchrun $SPOTRUN_TORCHRUN_ARGS train.py` joins the cluster
            TORCHRUN_ARGS_VAR: " ".join(self.rendezvous_args(rank)),
            **(EFA_ENV if self.efa else TCP_ENV),
        }
        env.update(overrides)
        return env

    def layout(self) -> dict[str, object]:
        return {
            "at": time.time(),
            "nodes": [
                {"rank": rank, "id": inst.id, "address": node_address(inst)}
                for rank, inst in enumerate(self.nodes)
            ],
        }


def write_layout(run_dir: Path, spec: ClusterSpec) -> None:
    path = run_dir / CLUSTER_LAYOUT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(spec.layout(), indent=1))
    os.replace(tmp, path)


def read_layout(run_dir: Path) -> list[str]:
    """The instance ids of the last start, node 0 first ([] before the first)."""
    try:
        data = json.loads((run_dir / CLUSTER_LAYOUT_FILE).read_text())
        return [str(node["id"]) for node in data["nodes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def local_dir(run_dir: Path, instance_id: str) -> Path:
    """Where a node's run folder is kept here: node 0's is the run folder itself."""
    ids = read_layout(run_dir)
    if not ids or ids[0] == instance_id:
        return run_dir
    return run_dir / NODES_DIR / instance_id


def node_dirs(run_dir: Path) -> list[Path]:
    """The run folder and the other nodes' folders (where their notices arrive)."""
    others = run_dir / NODES_DIR
    extra = sorted(p for p in others.iterdir() if p.is_dir()) if others.is_dir() else []
    return [run_dir, *extra]
