"""A live run's cost lines, recomputed every COST_REFRESH_S of a clock the test moves, from a
real ledger priced by the lab's constructed price histories."""

from __future__ import annotations

from pathlib import Path

from spotlab import costs as costlab
from spotlab.prices import ConstructedPrices
from spotrun.control.cost_lines import COST_REFRESH_S, CostLines
from spotrun.core.config import load_settings
from spotrun.core.waiting import ManualClock
from spotrun.store.ledger import Ledger


class PricedCloud(ConstructedPrices):
    """The AWS cloud as far as the cost lines see it: a name and its price histories."""

    name = "aws"
    shares_filesystem = False


def test_refreshed_at_its_interval_with_the_exact_bill(tmp_path: Path) -> None:
    costlab.build(tmp_path / "home")
    source = costlab.price_source()
    cloud = PricedCloud(on_demand=source.on_demand, spot=source.spot)
    with Ledger(load_settings(tmp_path / "home")) as ledger:
        alpha = ledger.resolve("alpha")
        clock = ManualClock()
        lines = CostLines(ledger, cloud, clock=clock)  # type: ignore[arg-type]
        lines.refresh(alpha)  # the first look records them at once
        assert ledger.run_cost_exact(alpha.id) == costlab.EXPECTED["alpha"].total
        ledger.replace_cost_lines(alpha.id, [])
        clock.advance(COST_REFRESH_S - 1)
        lines.refresh(alpha)
        assert ledger.cost_lines(alpha.id) == []  # not due yet
        clock.advance(1)
        lines.refresh(alpha)
        assert ledger.run_cost_exact(alpha.id) == costlab.EXPECTED["alpha"].total
