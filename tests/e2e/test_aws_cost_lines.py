"""The controller's cost lines priced through the AWS provider from the lab's EC2: a history
EC2 answers empty (the lab's market began hours ago, the runs are from 2025) and a refused
DescribeSpotPriceHistory (EC2's own error, injected by the lab) are each an event and no line;
the lab's price histories then give the exact lines. (spotlab/costs.py builds the runs.)"""

from __future__ import annotations

from fractions import Fraction as F

from spotlab import Lab
from spotlab import costs as costlab
from spotlab.fixtures import use_lab
from spotrun.cloud.aws import AwsProvider
from spotrun.control.cost_lines import CostLines
from spotrun.core.config import load_settings
from spotrun.cost.rules import AWS_METHOD
from spotrun.service import runs as api
from spotrun.store.ledger import Ledger
from tests.conftest import Env


def test_cost_lines_from_ec2_prices_and_a_refused_price_request(env: Env, lab: Lab) -> None:
    with use_lab(env, lab, root_volume_gb=costlab.ROOT_GB):  # the volume the runs are billed for
        _cost_lines(env, lab)


def _cost_lines(env: Env, lab: Lab) -> None:
    costlab.build(env.home)
    settings = load_settings(env.home)
    ledger = Ledger(settings)
    provider = AwsProvider(settings)
    alpha = ledger.resolve("alpha")

    # EC2 has no price for gamma's span (us-east-1b, in 2025): never priced as zero, an event.
    gamma = ledger.resolve("gamma")
    CostLines(ledger, provider).record(gamma)
    events = [e.message for e in ledger.events(gamma.id) if e.kind == "cost"]
    assert len(events) == 1 and "is empty" in events[0], events
    assert ledger.cost_lines(gamma.id) == []

    # EC2 refuses the price history, as to a user whose policy lacks the action.
    fault = lab.faults.ec2("DescribeSpotPriceHistory", "UnauthorizedOperation", times=None)
    CostLines(ledger, provider).record(alpha)
    events = [e.message for e in ledger.events(alpha.id) if e.kind == "cost"]
    assert len(events) == 1 and "DescribeSpotPriceHistory" in events[0], events
    assert ledger.cost_lines(alpha.id) == []
    rows = {r.key: r for r in api.cost_report(ledger, sources=lambda name: provider).rows}
    assert rows["alpha"].error and "DescribeSpotPriceHistory" in rows["alpha"].error
    assert fault.hits >= 2  # the controller's refresh and the report each asked EC2

    # EC2 answers again, with the histories and the on-demand price of the runs' type.
    lab.front.faults.clear()
    lab.prices.set_spot(costlab.TYPE, "us-east-1a", [(at, float(p)) for at, p in costlab.HISTORY_A])
    lab.prices.set_on_demand(costlab.TYPE, float(costlab.ON_DEMAND))
    CostLines(ledger, AwsProvider(settings)).record(alpha)
    assert ledger.run_cost_exact(alpha.id) == costlab.EXPECTED["alpha"].total
    compute = ledger.cost_lines(alpha.id)[0]
    seconds = costlab.A[1] - costlab.A[0]
    assert compute.method == AWS_METHOD and compute.quantity == seconds
    assert compute.on_demand_usd_exact == F(costlab.ON_DEMAND) * seconds / 3600
