"""`spotrun ui` over a run in the lab (moto + sshd hosts): a spot interruption shows on the run's
curve as a marker, and the cost page's total is `spotrun cost --json`'s.

One lab, one dashboard and one browser for the module; the run is digits-fast on the lab's
spot capacity, interrupted by `lab.interrupt` after its first evaluation.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from spotlab import spot as spotlab
from spotlab.fixtures import lab_root, use_lab
from spotlab.lab import Lab
from spotrun.core.money import show_usd
from tests.conftest import Env
from tests.e2e.ui_browser import Served, chromium, module_env, screenshot, seen, wait_seen
from tests.helpers import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Env, Lab]]:
    root = lab_root()
    started = Lab(root).start()
    try:
        with (
            module_env(tmp_path_factory.mktemp("ui-lab")) as env,
            use_lab(env, started, **spotlab.FAST),
        ):
            yield env, started
    finally:
        started.close()
        shutil.rmtree(root, ignore_errors=True)
    assert not started.errors, started.errors


@pytest.fixture(scope="module")
def run_id(lab_env: tuple[Env, Lab]) -> str:
    env, _ = lab_env
    args = ["launch", "digits-fast", "--cloud", "aws", "-d", "--name", "spotty"]
    for item in spotlab.OVERRIDES:
        args += ["--set", item]
    return env.cli(*args, check=True).stdout.strip()


@pytest.fixture(scope="module")
def served(lab_env: tuple[Env, Lab], run_id: str) -> Iterator[Served]:
    dashboard = Served(lab_env[0])
    yield dashboard
    dashboard.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    yield driver
    driver.quit()


def _state(env: Env, run_id: str) -> str:
    return str({r["id"]: r["state"] for r in env.runs()}[run_id])


def test_an_interruption_marker_appears_on_the_curve(
    lab_env: tuple[Env, Lab], run_id: str, served: Served, browser: webdriver.Chrome
) -> None:
    env, lab = lab_env
    browser.get(served.page(f"/run/{run_id}"))
    wait_seen(browser, "svg#curves polyline.curve", "the run's first evaluation", timeout=240)
    assert seen(browser, "svg#curves line.mark-interruption") == []  # none before the notice
    (instance,) = [i["InstanceId"] for i in lab.instances(run_id, states=("running",))]
    lab.interruptions.interrupt(instance, notice_s=spotlab.NOTICE_S)
    marks = wait_seen(
        browser, "svg#curves line.mark-interruption", "the interruption marker", timeout=120
    )
    assert marks
    (title,) = seen(browser, "svg#curves line.mark-interruption title")[:1]
    assert instance in title["text"]
    # the replacement shows too, and the instances table lists both with their prices
    wait_seen(browser, "svg#curves line.mark-replacement", "the replacement's marker", 240)
    wait_for(lambda: len(seen(browser, "#instances tbody tr")) >= 2, 60, "both instances listed")
    assert instance in seen(browser, "#instances tbody tr")[0]["text"]
    screenshot(browser, "run-interrupted")


def test_the_cost_page_total_is_spotrun_costs(
    lab_env: tuple[Env, Lab], run_id: str, served: Served, browser: webdriver.Chrome
) -> None:
    env, _ = lab_env
    wait_for(lambda: _state(env, run_id) in ("succeeded", "failed"), 240, "the run to end")
    assert _state(env, run_id) == "succeeded"
    rows = json.loads(env.cli("cost", "--json", check=True).stdout)
    expected = sum(row["cost_usd"] for row in rows)
    # priced from the lab's spot price history (a short run rounds to few cents, or none)
    assert sum(row["instance_seconds"] for row in rows) > 0 and rows[0]["cloud"] == "aws"
    browser.get(served.page("/cost"))
    wait_seen(browser, "#cost-total", "the cost page's total")
    shown = seen(browser, "#cost-total")[0]["text"]
    assert shown == show_usd(expected), (shown, rows)  # the one money rule, as `cost` shows it
    exact = browser.find_element(By.ID, "cost-total").get_attribute("title")
    assert float(exact or "nan") == pytest.approx(expected, abs=1e-12), (exact, rows)
    wait_seen(browser, "svg#spend-chart polyline.curve", "the cumulative spend curve")
    wait_seen(browser, "svg#price-chart polyline.curve", "the spot price steps")
    screenshot(browser, "cost")
