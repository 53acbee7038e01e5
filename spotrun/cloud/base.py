"""What every cloud provider offers the rest of spotrun, as typed dataclasses and protocols.

Provider methods are batch-shaped and idempotent, keyed by the run id: `launch` finds what a run
already has before it creates the shortfall, `terminate` may be called any number of times.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    # for the types only: reading runs from the ledger (spotrun ls) needs Plan and Offer from
    # here, and none of remote
    from spotrun.core.config import Resources
    from spotrun.remote.runner import Runner

Market = Literal["spot", "on-demand", "local"]


@dataclass(frozen=True)
class Offer:
    """One way to get capacity: an instance type in a zone at a price."""

    provider: str
    instance_type: str
    region: str
    zone: str
    gpus: int
    gpu_model: str | None
    gpu_memory_gb: float | None
    vcpus: int
    memory_gb: float
    spot_usd_per_hour: float | None
    on_demand_usd_per_hour: float | None
    market: Market = "spot"
    # Multi-node runs (--nodes): whether the type can join a cluster placement group, and
    # whether it has an Elastic Fabric Adapter for NCCL traffic between nodes.
    cluster_placement: bool = True
    efa: bool = False

    @property
    def usd_per_hour(self) -> float:
        price = self.spot_usd_per_hour if self.market == "spot" else self.on_demand_usd_per_hour
        return price if price is not None else float("inf")

    @property
    def saving_pct(self) -> float | None:
        if not self.spot_usd_per_hour or not self.on_demand_usd_per_hour:
            return None
        return 100.0 * (1.0 - self.spot_usd_per_hour / self.on_demand_usd_per_hour)

    def to_dict(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "instance_type": self.instance_type,
            "region": self.region,
            "zone": self.zone,
            "gpus": self.gpus,
            "gpu_model": self.gpu_model,
            "gpu_memory_gb": self.gpu_memory_gb,
            "vcpus": self.vcpus,
            "memory_gb": self.memory_gb,
            "spot_usd_per_hour": self.spot_usd_per_hour,
            "on_demand_usd_per_hour": self.on_demand_usd_per_hour,
            "market": self.market,
            "cluster_placement": self.cluster_placement,
            "efa": self.efa,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Offer:
        """An offer as stored (keys this version does not know are left out; missing ones
        take their defaults, as in plans recorded before they existed)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Plan:
    """The offers a run may take, in the order to try them, and why the first was chosen.
    Stored with the run (RunRecord.plan) and read back as this, never as a bare dict."""

    offers: list[Offer]  # cheapest first; the controller falls back along this list
    reason: str

    @property
    def chosen(self) -> Offer:
        return self.offers[0]

    def offer_of(self, instance_type: str, zone: str | None = None) -> Offer | None:
        """The planned offer of that type (in that zone, when given)."""
        for offer in self.offers:
            if offer.instance_type == instance_type and zone in (None, offer.zone):
                return offer
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"offers": [o.to_dict() for o in self.offers], "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        offers = [Offer.from_dict(o) for o in data.get("offers", []) if isinstance(o, dict)]
        return cls(offers, str(data.get("reason", "")))


@dataclass(frozen=True)
class InstanceRequest:
    """Ask for `count` instances of `offer` for run `run_id`."""

    run_id: str
    offer: Offer
    count: int = 1
    disk_gb: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    max_hours: float | None = None  # the run's wall-time cap; clouds tag resources to expire
    # Live instances that are going away (a spot notice): not counted as the run's capacity.
    replacing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Instance:
    id: str
    run_id: str
    provider: str
    instance_type: str
    region: str
    zone: str
    market: Market
    state: str  # EC2 vocabulary: pending, running, shutting-down, terminated, stopping, stopped
    address: str | None = None
    launched_at: float | None = None
    node_index: int = 0
    state_reason: str | None = None  # why it is ending, e.g. a spot interruption
    ended_at: float | None = None  # when the cloud moved it to shutting-down/terminated
    # The address inside the cloud's network (nodes of a cluster reach each other on it);
    # `address` is the one spotrun connects to, public or private by settings.
    private_address: str | None = None

    @property
    def is_live(self) -> bool:
        return self.state in ("pending", "running")

    @property
    def is_stopped(self) -> bool:
        """Stopped or stopping (a spot stop or hibernation, a scheduled retirement): no
        capacity to run on, yet its volumes bill until it is terminated."""
        return self.state in ("stopping", "stopped")


class Provider(Protocol):
    name: str
    # True when the instance sees the controller's files (the local cloud): no syncing needed.
    shares_filesystem: bool

    def offers(self, resources: Resources) -> list[Offer]:
        """Offers that fit `resources`, cheapest first. Raises UsageError when none can fit."""
        ...

    def launch(self, request: InstanceRequest) -> list[Instance]:
        """The run's live instances, creating only the shortfall up to `request.count`."""
        ...

    def describe(self, run_id: str) -> list[Instance]:
        """Every instance the cloud knows for the run, live or ended."""
        ...

    def wait_ready(self, instances: list[Instance], timeout_s: float) -> list[Instance]:
        """Block until each instance runs and answers its runner; terminate them on timeout."""
        ...

    def terminate(self, run_id: str) -> list[Instance]:
        """Terminate everything the run owns; safe to repeat. Returns what was terminated."""
        ...

    def terminate_instances(self, run_id: str, ids: list[str]) -> list[Instance]:
        """Terminate only these instances of the run (a replaced one); returns them as ended."""
        ...

    def runner(self, instance: Instance) -> Runner: ...

    def forget(self, run_id: str) -> None:
        """Delete what the cloud and this machine keep of an ended run (its records, stored
        files, keys): `spotrun rm`."""
        ...

    def run_dir(self, instance: Instance, run_id: str) -> str:
        """Where the run's files live on the instance."""
        ...

    def spotrun_command(self, instance: Instance) -> list[str]:
        """argv prefix that runs spotrun on the instance (e.g. [python3, -m, spotrun])."""
        ...

    def bootstrap(self, instance: Instance, runner: Runner) -> None:
        """Make the instance able to run spotrun jobs (push code, provision); idempotent."""
        ...
