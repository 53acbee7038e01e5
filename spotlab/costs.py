"""A ledger of past runs with instances and price histories we construct, built through the
Ledger API with its clock set to each moment, and the figures expected of them worked out
second by second, independently of spotrun.cost.price_history's integral.

    alpha   digits-fast, one spot g5.xlarge in us-east-1a for 2 h 7 min; the price steps up
            at 09:37:12 and down at 10:15:00; reaches 97% accuracy after 3,000 s of training
    beta    sweep sw1: interrupted by AWS after 40 min in us-east-1a (free), replaced in
            us-east-1b, where it finishes
    gamma   sweep sw1: interrupted by AWS after 1 h 30 min in us-east-1b (charged)
    home    the local cloud: no charge
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction as F
from pathlib import Path

from spotlab.prices import ConstructedPrices, utc
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.core.runstates import RunState
from spotrun.store.ledger import InstanceRecord, Ledger, RunRecord

T0 = utc("2025-03-10 09:00:00")
TYPE = "g5.xlarge"
ON_DEMAND = "1.006"
INTERRUPTED = "Server.SpotInstanceTermination: Spot instance termination"
USER = "Client.UserInitiatedShutdown: User initiated shutdown"

HISTORY_A = [(T0 - 3 * 86400, "0.40"), (T0 + 2232, "0.52"), (T0 + 4500, "0.37")]
HISTORY_B = [(T0 - 2 * 86400, "0.45"), (T0 + 6000, "0.41")]
ROOT_GB = 200  # settings.aws.root_volume_gb: the volume billed when the record lists none


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def price_source() -> ConstructedPrices:
    source = ConstructedPrices(on_demand={TYPE: float(ON_DEMAND)})
    source.add("us-east-1a", TYPE, [(at, float(p)) for at, p in HISTORY_A])
    source.add("us-east-1b", TYPE, [(at, float(p)) for at, p in HISTORY_B])
    return source


# ---------------------------------------------------------------- expected
def price_at(history: list[tuple[int, str]], second: int) -> F:
    return F([p for at, p in history if at <= second][-1])


def spot_seconds(history: list[tuple[int, str]], start: int, stop: int) -> F:
    """Brute force: every second at the price in force then."""
    return sum((price_at(history, s) / 3600 for s in range(start, stop)), F(0))


def storage(start: int, stop: int, gb: int = ROOT_GB) -> F:
    """gp3 in us-east-1 at $0.08 per GB-month; every second here is in March 2025 (31 days)."""
    return F("0.08") * gb * F(max(stop - start, 60), 31 * 86400)


def on_demand(start: int, stop: int) -> F:
    return F(ON_DEMAND) * max(stop - start, 60) / 3600


@dataclass(frozen=True)
class Expected:
    spot: F
    storage: F
    on_demand: F  # compute on demand + the same storage
    instance_s: int

    @property
    def total(self) -> F:
        return self.spot + self.storage


A = (T0 - 100, T0 + 7530)
B1, B2 = (T0, T0 + 2400), (T0 + 2500, T0 + 9000)
C = (T0 + 3600, T0 + 3600 + 5400)

EXPECTED = {
    "alpha": Expected(
        spot_seconds(HISTORY_A, *A),
        storage(*A),
        on_demand(*A) + storage(*A),
        A[1] - A[0],
    ),
    "beta": Expected(
        spot_seconds(HISTORY_B, *B2),  # the first instance was interrupted in its first hour
        storage(*B1) + storage(*B2),
        on_demand(*B1) + on_demand(*B2) + storage(*B1) + storage(*B2),
        (B1[1] - B1[0]) + (B2[1] - B2[0]),
    ),
    "gamma": Expected(
        spot_seconds(HISTORY_B, *C),
        storage(*C),
        on_demand(*C) + storage(*C),
        C[1] - C[0],
    ),
    "home": Expected(F(0), F(0), F(0), 600),
}
# alpha reaches the target at 3,000 s of training, its job having started at T0.
ALPHA_TARGET_AT = T0 + 3000
ALPHA_COST_TO_TARGET = spot_seconds(HISTORY_A, A[0], ALPHA_TARGET_AT) + storage(
    A[0], ALPHA_TARGET_AT
)


# ------------------------------------------------------------------ building
def _instance(
    iid: str, zone: str, span: tuple[int, int], reason: str, market: str = "spot"
) -> InstanceRecord:
    return InstanceRecord(
        id=iid,
        run_id="",
        provider="aws" if market != "local" else "local",
        instance_type=TYPE if market != "local" else "local",
        market=market,
        state="terminated",
        region="us-east-1" if market != "local" else "local",
        zone=zone,
        launched_at=float(span[0]),
        terminated_at=float(span[1]),
        end_reason=reason,
    )


def _run(
    ledger: Ledger,
    clock: Clock,
    name: str,
    moves: list[tuple[int, RunState]],
    instances: list[InstanceRecord],
    *,
    cloud: str = "aws",
    sweep: str | None = None,
    metrics: list[dict[str, float]] | None = None,
) -> RunRecord:
    clock.at = moves[0][0]
    run = ledger.create_run(
        LaunchSpec(recipe="digits-fast", name=name, cloud=cloud),
        sweep_id=sweep,
    )
    for at, state in moves[1:]:
        clock.at = at
        ledger.transition(run.id, state, f"to {state.value}")
    for inst in instances:
        ledger.upsert_instance(InstanceRecord(**{**inst.__dict__, "run_id": run.id}))
    if metrics:
        (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return ledger.get_run(run.id)


S = RunState


def build(home: Path) -> dict[str, RunRecord]:
    """The four runs in a ledger at `home`; returns them by name."""
    clock = Clock(T0)
    ledger = Ledger(load_settings(home), clock=clock)
    runs = {
        "alpha": _run(
            ledger,
            clock,
            "alpha",
            [
                (T0 - 120, S.PLANNED),
                (T0 - 110, S.REQUESTED),
                (T0 - 100, S.PROVISIONING),
                (T0 - 50, S.BOOTSTRAPPING),
                (T0, S.RUNNING),
                (T0 + 7500, S.SYNCING),
                (T0 + 7530, S.SUCCEEDED),
            ],
            [_instance("i-a1", "us-east-1a", A, USER)],
            metrics=[
                {"step": 100, "epoch": 1, "elapsed_s": 1000.0, "test_acc": 0.91},
                {"step": 300, "epoch": 3, "elapsed_s": 3000.0, "test_acc": 0.975},
                {"step": 600, "epoch": 6, "elapsed_s": 6000.0, "test_acc": 0.981},
            ],
        ),
        "beta": _run(
            ledger,
            clock,
            "beta",
            [
                (T0 - 10, S.PLANNED),
                (T0 - 5, S.REQUESTED),
                (T0, S.PROVISIONING),
                (T0 + 30, S.BOOTSTRAPPING),
                (T0 + 60, S.RUNNING),
                (T0 + 2400, S.INTERRUPTED),
                (T0 + 2450, S.REQUESTED),
                (T0 + 2500, S.PROVISIONING),
                (T0 + 2560, S.BOOTSTRAPPING),
                (T0 + 2600, S.RUNNING),
                (T0 + 8990, S.SYNCING),
                (T0 + 9000, S.SUCCEEDED),
            ],
            [
                _instance("i-b1", "us-east-1a", B1, INTERRUPTED),
                _instance("i-b2", "us-east-1b", B2, USER),
            ],
            sweep="sw1",
            metrics=[{"step": 300, "epoch": 3, "elapsed_s": 3000.0, "test_acc": 0.972}],
        ),
        "gamma": _run(
            ledger,
            clock,
            "gamma",
            [
                (T0 + 3590, S.PLANNED),
                (T0 + 3595, S.REQUESTED),
                (T0 + 3600, S.PROVISIONING),
                (T0 + 3660, S.BOOTSTRAPPING),
                (T0 + 3700, S.RUNNING),
                (C[1], S.STOPPED),
            ],
            [_instance("i-c1", "us-east-1b", C, INTERRUPTED)],
            sweep="sw1",
            metrics=[{"step": 10, "epoch": 1, "elapsed_s": 100.0, "test_acc": 0.5}],
        ),
        "home": _run(
            ledger,
            clock,
            "home",
            [
                (T0 + 86400, S.PLANNED),
                (T0 + 86400 + 2, S.PROVISIONING),
                (T0 + 86400 + 5, S.RUNNING),
                (T0 + 86400 + 605, S.FAILED),
            ],
            [_instance("local-x", "box", (T0 + 86400 + 5, T0 + 86400 + 605), "job", "local")],
            cloud="local",
        ),
    }
    ledger.close()
    return runs
