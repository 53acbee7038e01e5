"""A finished run's cost as the ledger settled it: the sum of its cost lines.

Apart from spotrun.cost.bills (which prices a run from its instances, the billing rules and the
price cache) so that listing finished runs (`spotrun ls`) imports none of that.
"""

from __future__ import annotations

from fractions import Fraction

from spotrun.store.ledger import Ledger, RunRecord


def settled_cost(ledger: Ledger, run: RunRecord) -> Fraction | None:
    """The sum of a finished run's cost lines; None while it runs or before they are written."""
    if not run.is_terminal:
        return None
    lines = ledger.cost_lines(run.id)
    return sum((line.amount for line in lines), Fraction(0)) if lines else None
