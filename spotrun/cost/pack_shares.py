"""Pricing a packed trial: its share's part of the pack instance's bill.

Every second of the instance's bill (compute at the spot price in force, its volume) is split
equally between the trials on it in that second. Seconds with no trial on it (booting before
the first one starts its job, the teardown after the last one left, the 60-second minimum) go
to the trials nearest in time: those on it just before (or, at the start, just after). The
trials' shares therefore add up to the instance's bill exactly.
"""

from __future__ import annotations

from fractions import Fraction

from spotrun.cost import amounts
from spotrun.cost import rules as cost
from spotrun.cost.instance_bills import bill_instance
from spotrun.cost.prices import PriceBook
from spotrun.cost.share_bill import ShareBill, Span
from spotrun.store.ledger import InstanceRecord, Ledger, RunRecord
from spotrun.store.sweeps import SweepStore


def split(start: int, end: int, shares: list[tuple[str, int, int]]) -> dict[str, list[Span]]:
    """Each key's spans of [start, end) with its fraction in each; `shares` are (key, from, to)."""

    def clip(t: int) -> int:
        return min(max(t, start), end)

    points = sorted(
        {start, end, *(clip(j) for _, j, _ in shares), *(clip(x) for _, _, x in shares)}
    )
    pieces: list[tuple[int, int, list[str]]] = []
    for a, b in zip(points, points[1:]):
        if b > a:
            pieces.append((a, b, [k for k, j, x in shares if j <= a and x >= b]))
    filled: list[list[str]] = [p[2] for p in pieces]
    for i in range(1, len(filled)):  # a gap goes to the shares just before it
        if not filled[i]:
            filled[i] = filled[i - 1]
    for i in range(len(filled) - 2, -1, -1):  # a gap at the start to the first ones after it
        if not filled[i]:
            filled[i] = filled[i + 1]
    spans: dict[str, list[Span]] = {}
    for (a, b, _), keys in zip(pieces, filled):
        for key in keys:
            fraction = Fraction(1, len(keys))
            mine = spans.setdefault(key, [])
            if mine and mine[-1][1] == a and mine[-1][2] == fraction:
                mine[-1] = (mine[-1][0], b, fraction)
            else:
                mine.append((a, b, fraction))
    return spans


def bill_share(
    ledger: Ledger,
    record: InstanceRecord,
    run: RunRecord,
    book: PriceBook,
    *,
    now: float,
    offline: bool,
) -> ShareBill | None:
    """The bill of a trial's share of a pack instance, or None if `record` is no share."""
    store = SweepStore(ledger)
    share = store.share(record.id)
    if share is None:
        return None
    inst = store.pack_instance(share.instance_id)
    if inst is None or inst.launched_at is None:
        return None
    ended = inst.terminated_at is not None
    start = amounts.whole_second(inst.launched_at)
    end = max(start, amounts.whole_second(inst.terminated_at if ended else now))  # type: ignore[arg-type]
    disk = run.spec.resources.disk_gb or ledger.settings.run.root_volume_gb
    market: cost.Market = "spot" if inst.market == "spot" else "on-demand"
    if inst.market == "local":
        market = "local"
    whole_usage = cost.Usage(
        instance_id=inst.id,
        instance_type=inst.instance_type,
        region=inst.region or "",
        zone=inst.zone or "",
        market=market,
        start=start,
        end=end,
        ending=cost.ending_of(inst.end_reason, ended=ended),
        volumes=() if market == "local" else (cost.Volume(size_gb=disk),),
    )
    holder = InstanceRecord(
        id=inst.id,
        run_id=run.id,
        provider=inst.provider,
        instance_type=inst.instance_type,
        market=inst.market,
        state="terminated" if ended else "running",
        region=inst.region,
        zone=inst.zone,
    )
    whole = bill_instance(holder, whole_usage, book, offline)
    shares = [
        (
            s.id,
            amounts.whole_second(s.joined_at),
            amounts.whole_second(s.left_at) if s.left_at is not None else whole.end,
        )
        for s in store.shares_on(inst.id)
    ]
    spans = tuple(split(start, whole.end, shares).get(share.id, []))
    share_start = amounts.whole_second(share.joined_at)
    share_end = amounts.whole_second(share.left_at) if share.left_at is not None else end
    compute_s = sum(
        (fraction * max(0, min(b, whole.billed_stop) - a) for a, b, fraction in spans),
        Fraction(0),
    )
    return ShareBill(
        usage=cost.Usage(
            instance_id=share.id,
            instance_type=inst.instance_type,
            region=inst.region or "",
            zone=inst.zone or "",
            market=market,
            start=share_start,
            end=max(share_start, share_end),
            ending=cost.Ending.USER if share.left_at is not None or ended else cost.Ending.LIVE,
        ),
        billed_s=round(compute_s) if whole.billed_s else 0,
        history=whole.history,
        on_demand_rate=whole.on_demand_rate,
        volumes=(),
        whole=whole,
        spans=spans,
    )
