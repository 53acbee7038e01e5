"""What `spotrun ui` costs while one browser watches N live runs.

    PYTHONPATH=. python bench/ui_load.py [--runs 100] [--window-s 30] [--loads 5]

A fresh SPOTRUN_HOME (`controller = "one"`: one process drives every run) with N live runs of
your own command on the local cloud, each appending a metrics line every 2 s. Then `spotrun ui`
and headless Chromium (Debian's, through its chromedriver): the runs page loaded --loads times
(navigation to a table holding all N rows; goal under 1 s) and a run's page once; then, for
--window-s seconds while the browser keeps the runs page open (it polls every 2 s), the server
process's CPU as a share of one core (goal under 5%) and its resident memory (goal under
100 MB), beside the same figures of the home's controller (the process that drives the N runs)
over the same window. The CPU model is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import hardware_line  # noqa: E402
from spotrun.core.config import load_settings  # noqa: E402
from spotrun.drive.home import running_pid  # noqa: E402
from tests.e2e.ui_browser import chromium  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
JOB = (
    'for i in $(seq 1 100000); do echo "{\\"step\\": $i, \\"epoch\\": $i, \\"test_acc\\": 0.5,'
    ' \\"elapsed_s\\": $((i*2))}" >> "$SPOTRUN_RUN_DIR/metrics.jsonl"; sleep 2; done'
)


def spotrun(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "spotrun", *args], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"spotrun {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--loads", type=int, default=5)
    opts = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ui-load-"))
    (home / "config.toml").write_text('controller = "one"\n')
    env = {**os.environ, "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("TMUX", None)
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        ids = list(
            pool.map(
                lambda i: spotrun(env, "launch", "--cmd", JOB, "--name", f"r{i:03d}", "-d"),
                range(opts.runs),
            )
        )
    print(f"{len(ids)} runs launched in {time.monotonic() - started:.0f} s", flush=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "spotrun", "ui", "--no-browser"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    browser = chromium()
    try:
        count = "return document.querySelectorAll('tr.run-row').length"
        loads = []
        for _ in range(opts.loads):
            t0 = time.perf_counter()
            browser.get(url)
            while browser.execute_script(count) < opts.runs:
                time.sleep(0.01)
            loads.append(time.perf_counter() - t0)
        base = url.split("/?token=")[0]
        token = url.split("token=")[1]
        t0 = time.perf_counter()
        browser.get(f"{base}/run/{ids[0]}?token={token}")
        curve = "return document.querySelectorAll('svg#curves polyline.curve').length"
        while browser.execute_script(curve) < 1:
            time.sleep(0.01)
        run_page = time.perf_counter() - t0
        browser.get(url)  # one browser watching the runs page, polling
        while browser.execute_script(count) < opts.runs:
            time.sleep(0.05)
        controller = running_pid(load_settings(home))
        assert controller is not None, "the home's controller is not running"
        pids = (server.pid, controller)
        cpu0, wall0 = [cpu_s(pid) for pid in pids], time.monotonic()
        memory: list[list[float]] = [[], []]
        while time.monotonic() - wall0 < opts.window_s:
            for seen, pid in zip(memory, pids):
                seen.append(rss_mb(pid))
            time.sleep(1)
        wall = time.monotonic() - wall0
        share, driving = [(cpu_s(pid) - c0) / wall for pid, c0 in zip(pids, cpu0)]
        # the figures first: stopping N runs afterwards takes minutes
        print(f"hardware: {hardware_line()}")
        print(f"live runs: {opts.runs}; load average {os.getloadavg()[0]:.1f}")
        print(
            f"runs page, all {opts.runs} rows shown: median {statistics.median(loads):.3f} s, "
            f"max {max(loads):.3f} s over {len(loads)} loads (goal < 1 s)"
        )
        print(f"run page, its curve drawn: {run_page:.3f} s")
        print(
            f"server while one browser watches ({opts.window_s:.0f} s): CPU {100 * share:.1f}% "
            f"of one core (goal < 5%), memory {max(memory[0]):.0f} MB max RSS (goal < 100 MB)"
        )
        print(
            f"the controller driving the {opts.runs} runs, same window: CPU {100 * driving:.1f}% "
            f"of one core, memory {max(memory[1]):.0f} MB max RSS"
        )
    finally:
        browser.quit()
        os.killpg(server.pid, signal.SIGINT)
        server.wait()
        # one command for all: a command each took ~15 s apiece at load 20
        subprocess.run(
            [sys.executable, "-m", "spotrun", "stop", *ids], env=env, capture_output=True
        )


if __name__ == "__main__":
    main()
