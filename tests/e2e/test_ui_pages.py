"""`spotrun ui` in a real browser (headless Chromium), over real local runs and a real sweep.

One SPOTRUN_HOME, one dashboard and one browser for the module: a live digits-fast run, a
finished one, a run of your own command with a secret in its --env (that it prints), and a
two-trial ASHA sweep in which lr=0.0005 is pruned at its first rung. Each test asserts what a
person sees on a page (rows, a curve's points, a greyed trial) and saves a screenshot of it
under docs/screenshots/ when UPDATE_SCREENSHOTS=1 (else in a temporary folder).

The sweep runs its trials one after the other: ASHA promotes the first trial to reach a rung
(it has no one to compare with), so two trials side by side prune the bad one only when the
good one happens to reach epoch 1 first. In turn, lr=0.2 sets every rung's bar and lr=0.0005
(test_acc 0.14 against 0.65 at epoch 1) always falls under it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

from spotrun.core.config import load_settings
from spotrun.store.ledger import Ledger
from spotrun.store.sweeps import SweepStore
from tests.conftest import Env
from tests.e2e.ui_browser import (
    Served,
    chromium,
    click,
    module_env,
    screenshot,
    seen,
    wait_seen,
)
from tests.helpers import wait_for

pytestmark = pytest.mark.slow

SECRET = "sk-ui-probe-7f3a9c1e55d04b2a"  # the --env value no page may show
THREADS = ["--set", "threads=1"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with module_env(tmp_path_factory.mktemp("ui")) as env:
        yield env


@pytest.fixture(scope="module")
def runs(home: Env) -> dict[str, str]:
    """The module's runs and sweep, started in the background (ids by role)."""
    found = {}
    found["done"] = home.cli(
        "launch",
        "digits-fast",
        "--set",
        "epochs=2",
        *THREADS,
        "--name",
        "finished",
        "-d",
        check=True,
    ).stdout.strip()
    found["live"] = home.cli(
        "launch",
        "digits-fast",
        "--set",
        "epochs=60",
        *THREADS,
        "--name",
        "live",
        "-d",
        check=True,
    ).stdout.strip()
    found["secret"] = home.cli(
        "launch",
        "--cmd",
        "echo the key is $PROBE_KEY; sleep 600",
        "--env",
        f"PROBE_KEY={SECRET}",
        "--name",
        "secretive",
        "-d",
        check=True,
    ).stdout.strip()
    home.cli(
        "sweep",
        "digits-fast",
        "--grid",
        "lr=0.2,0.0005",
        "--set",
        "epochs=4",
        *THREADS,
        "--max-parallel",
        "1",
        "--early-stop",
        "asha",
        "--grace-epochs",
        "1",
        "--reduction-factor",
        "2",
        "--name",
        "grid",
        "-d",
        check=True,
    )
    return found


@pytest.fixture(scope="module")
def served(home: Env, runs: dict[str, str]) -> Iterator[Served]:
    dashboard = Served(home)
    yield dashboard
    dashboard.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium()
    yield driver
    driver.quit()


def _fetch(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _sweep(home: Env) -> dict[str, Any]:
    return dict(json.loads(home.cli("sweep", "status", "grid", "--json", check=True).stdout))


def _sweep_over(home: Env) -> bool:
    """The sweep's end, read from the ledger here (`sweep status` every 0.2 s costs a core)."""
    with Ledger(load_settings(home.home)) as ledger:
        return SweepStore(ledger).resolve("grid").is_over


def test_runs_table_fills_and_filters(
    served: Served, browser: webdriver.Chrome, runs: dict[str, str]
) -> None:
    browser.get(served.page("/"))
    wanted = {runs["done"], runs["live"], runs["secret"]}
    wait_for(
        lambda: wanted <= {r["data-run"] for r in _rows(browser)},
        60,
        "the runs table to list the module's runs",
    )
    (finished,) = wait_for(
        lambda: [
            r
            for r in _rows(browser)
            if r["data-run"] == runs["done"] and r["data-state"] == "succeeded"
        ],
        120,
        "the finished run's row, succeeded",
    )
    assert "finished" in finished["text"] and "% acc" in finished["text"]
    assert "digits-fast epochs=2" in finished["text"]  # the recipe with its overrides
    screenshot(browser, "runs")
    choose(browser, "filter-state", "succeeded")
    wait_for(
        lambda: {r["data-state"] for r in _rows(browser)} == {"succeeded"},
        30,
        "only succeeded runs",
    )


def _rows(browser: webdriver.Chrome) -> list[dict[str, str]]:
    return seen(browser, "tr.run-row", "data-run", "data-state")


def choose(browser: webdriver.Chrome, select_id: str, value: str) -> None:
    """Pick an option of a <select>, as a person does."""
    wait_seen(browser, f"#{select_id} option[value='{value}']", f"option {value}")
    browser.find_element(By.CSS_SELECTOR, f"#{select_id} option[value='{value}']").click()


def _curves(browser: webdriver.Chrome) -> list[dict[str, str]]:
    return seen(browser, "svg#curves polyline.curve", "data-name", "data-points")


def test_a_live_runs_curve_grows(
    served: Served, browser: webdriver.Chrome, runs: dict[str, str]
) -> None:
    browser.get(served.page(f"/run/{runs['live']}"))

    def points() -> int:
        curves = _curves(browser)
        return int(curves[0]["data-points"] or 0) if curves else 0

    first = wait_for(points, 120, "the live run's first evaluation on its curve")
    wait_for(lambda: points() > first, 120, "the curve to grow by another evaluation")
    assert [c["data-name"] for c in _curves(browser)] == ["live"]  # labelled by the run's name
    assert seen(browser, "#run-state")[0]["text"] == "running"
    wait_for(lambda: "epoch" in seen(browser, "#log")[0]["text"], 60, "job.log's tail")
    assert '"epochs": 60' in seen(browser, "#recipe")[0]["text"]
    screenshot(browser, "run")


# A job that appends one evaluation each time the test lets it (a go-N file in its folder).
STEPPED_JOB = (
    'for n in 1 2; do while [ ! -e "$SPOTRUN_RUN_DIR/go-$n" ]; do sleep 0.1; done; '
    'echo "{\\"step\\": $n, \\"epoch\\": $n, \\"test_acc\\": 0.${n}5}" '
    '>> "$SPOTRUN_RUN_DIR/metrics.jsonl"; done; sleep 600'
)


def test_a_new_metric_shows_on_the_open_runs_and_run_pages(
    served: Served, browser: webdriver.Chrome, home: Env
) -> None:
    run_id = home.cli("launch", "--cmd", STEPPED_JOB, "--name", "stepped", "-d", check=True)
    run_id = run_id.stdout.strip()
    folder = home.home / "runs" / run_id
    try:
        browser.get(served.page("/"))
        row = f"tr.run-row[data-run='{run_id}']"
        wait_for(lambda: seen(browser, row, "data-state")[0]["data-state"] == "running"
                 if seen(browser, row) else False, 120, "the run's row, running")  # fmt: skip
        assert "% acc" not in seen(browser, row)[0]["text"]  # no evaluation yet
        browser.execute_script("window.sameLoad = true")  # gone if the page is loaded again
        (folder / "go-1").touch()
        told = time.monotonic()
        wait_for(lambda: "15.0% acc" in seen(browser, row)[0]["text"], 60, "the metric in its row")
        print(f"runs page: the metric shown {time.monotonic() - told:.1f} s after it was let go")
        assert browser.execute_script("return window.sameLoad") is True  # polled, not reloaded

        browser.get(served.page(f"/run/{run_id}"))
        wait_for(lambda: _curves(browser) and _curves(browser)[0]["data-points"] == "1", 60,
                 "the run's curve with its one evaluation")  # fmt: skip
        browser.execute_script("window.sameLoad = true")
        (folder / "go-2").touch()
        told = time.monotonic()
        wait_for(lambda: _curves(browser)[0]["data-points"] == "2", 60, "the curve's second point")
        print(f"run page: the point drawn {time.monotonic() - told:.1f} s after it was let go")
        assert browser.execute_script("return window.sameLoad") is True
    finally:
        home.cli("stop", run_id, timeout=300)


def test_compare_overlays_the_selected_runs(
    served: Served, browser: webdriver.Chrome, runs: dict[str, str]
) -> None:
    browser.get(served.page("/"))
    for run_id in (runs["done"], runs["live"]):
        wait_seen(browser, f"input.pick[data-run='{run_id}']", f"run {run_id}'s box")
        click(browser, f"input.pick[data-run='{run_id}']")
    click(browser, "#compare")
    wait_for(
        lambda: {c["data-name"] for c in _curves(browser)} == {"finished", "live"},
        60,
        "both runs' curves overlaid",
    )
    screenshot(browser, "compare")


def test_the_sweep_view_greys_a_pruned_trial(
    home: Env, served: Served, browser: webdriver.Chrome
) -> None:
    wait_for(lambda: _sweep_over(home), 180, "the sweep to end")
    sweep = _sweep(home)
    assert sweep["state"] != "running", sweep
    board = sweep["leaderboard"]
    (pruned,) = [t for t in board if t["status"] == "pruned"]
    assert pruned["params"] == {"lr": "0.0005"} and "at epoch 1 " in pruned["reason"], board
    browser.get(served.page(f"/sweep/{sweep['id']}"))
    wait_seen(browser, "tr.trial-row.pruned", "the pruned trial's row")
    (row,) = seen(browser, "tr.trial-row.pruned")
    assert "ASHA" in row["text"]  # the reason, beside the trial
    assert _style(browser, "tr.trial-row.pruned td", "color") == "rgb(154, 160, 168)"  # grey
    wait_seen(browser, "polyline.pc-line.pruned", "its line in the parallel view")
    (line,) = seen(browser, "polyline.pc-line.pruned", "data-trial")
    assert line["data-trial"] == str(pruned["trial"])
    assert _style(browser, "polyline.pc-line.pruned", "stroke") == "rgb(196, 200, 206)"
    assert _style(browser, "polyline.pc-line:not(.pruned)", "stroke") != "rgb(196, 200, 206)"
    screenshot(browser, "sweep")


def _style(browser: webdriver.Chrome, css: str, prop: str) -> str:
    """The computed style a person sees on the first element matching `css`."""
    script = "return getComputedStyle(document.querySelector(arguments[0]))[arguments[1]]"
    return str(browser.execute_script(script, css, prop))


def test_no_page_shows_an_env_value(
    served: Served, browser: webdriver.Chrome, runs: dict[str, str], home: Env
) -> None:
    log = home.home / "runs" / runs["secret"] / "job.log"
    wait_for(lambda: log.exists() and SECRET in log.read_text(), 60, "the job to print its key")
    browser.get(served.page(f"/run/{runs['secret']}"))
    wait_for(lambda: "the key is" in seen(browser, "#log")[0]["text"], 60, "its log")
    assert "the key is [hidden]" in seen(browser, "#log")[0]["text"]
    for path in ("/", f"/run/{runs['secret']}", "/cost", f"/compare?runs={runs['secret']}"):
        browser.get(served.page(path))
        wait_seen(browser, "table, svg, p", f"{path} drawn")
        assert SECRET not in browser.page_source, path
    for api in ("/api/runs", f"/api/run/{runs['secret']}", "/api/cost", "/api/sweeps"):
        status, body = _fetch(served.page(api))
        assert status == 200 and SECRET not in body, api


def test_every_request_needs_the_token(served: Served, runs: dict[str, str]) -> None:
    for path in ("/", "/cost", f"/run/{runs['live']}", "/api/runs", "/static/app.js"):
        status, body = _fetch(served.base + path)
        assert status == 403 and "token" in body, path
        assert _fetch(served.base + path + "?token=wrong")[0] == 403, path
        assert _fetch(served.page(path))[0] == 200, path


def test_a_stop_needs_the_token_and_the_dashboards_own_origin(
    served: Served, runs: dict[str, str], home: Env
) -> None:
    url = f"{served.base}/api/run/{runs['secret']}/stop"

    def post(**headers: str) -> int:
        request = urllib.request.Request(url, data=b"", method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    assert post(Origin=served.base) == 403  # no token
    token = {"X-Spotrun-Token": served.token}
    assert post(**token) == 403  # no origin: not from a page
    assert post(**token, Origin="http://evil.example") == 403
    assert post(**token, Origin=served.base, **{"Sec-Fetch-Site": "cross-site"}) == 403
    assert {r["id"]: r["state"] for r in home.runs()}[runs["secret"]] == "running"
    assert post(**token, Origin=served.base) == 200
    assert {r["id"]: r["state"] for r in home.runs()}[runs["secret"]] == "stopped"
    assert post(**token, Origin=served.base) == 400  # the CLI's own check: already ended


def test_binding_another_address_needs_expose(home: Env) -> None:
    proc = home.cli("ui", "--no-browser", "--host", "0.0.0.0", timeout=60)
    assert proc.returncode != 0 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()[:1]
    assert "--host 0.0.0.0 would let other machines reach the dashboard" in line
    assert "--expose" in proc.stderr


def test_tensorboard_lists_runs_by_name_and_each_run_links_to_it(
    home: Env, served: Served, browser: webdriver.Chrome, runs: dict[str, str]
) -> None:
    browser.get(served.page("/"))
    folder = home.home / "tensorboard"
    wait_for(lambda: (folder / "finished").is_symlink(), 60, "the runs' links by name")
    # TensorBoard's own reader: what `tensorboard --logdir ~/.spotrun/tensorboard` lists
    listed = EventMultiplexer().AddRunsFromDirectory(str(folder))
    listed.Reload()
    assert {"finished", "live"} <= set(listed.Runs())
    browser.get(served.page(f"/run/{runs['done']}"))
    wait_seen(browser, "a[href^='/tensorboard/']", "the run's TensorBoard link")
    (link,) = seen(browser, "a[href^='/tensorboard/']", "href")
    assert link["href"].startswith(f"/tensorboard/{runs['done']}?token=")
