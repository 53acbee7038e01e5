"""N concurrent lab runs under one controller against today's per-run supervisors.

    PYTHONPATH=. python bench/controller_scale.py [--runs 8] [--repeats 2] [--window-s 30]
        [--modes one,per-run]

One round: a fresh SPOTRUN_HOME with `controller = "one"` or `"per-run"`, N runs of your own
command launched on the lab's EC2 (`spotrun launch --cmd ... --cloud aws -d`), each writing a
metrics line with its time every second on its instance. Once every run is running, for
`--window-s` seconds: the resident memory of every spotrun process on the controller side (the
controller, or the supervisors; the instances' processes are the lab's hosts, not counted), the
CPU they used as a share of one core, and the sync lag (a metric line's time on the instance to
the moment the ledger holds it, sampled every 0.2 s). The two modes alternate, each repeated;
the medians are printed side by side with the CPU line. The lab's hosts run at nice 19.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spotlab import Lab  # noqa: E402
from spotrun.drive.driver_process import is_driver  # noqa: E402

# A metrics line every second, with the instance's time in it.
JOB = (
    'i=0; while true; do i=$((i+1)); echo "{\\"step\\": $i, \\"written_at\\": $(date +%s.%N)}" '
    '>> "$SPOTRUN_RUN_DIR/metrics.jsonl"; sleep 1; done'
)
TICK = os.sysconf("SC_CLK_TCK")


def cpu_line() -> str:
    model, flags = "unknown CPU", set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and model == "unknown CPU":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    shown = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return f"CPU: {model}, {os.cpu_count()} cores, flags {' '.join(shown) or 'none of avx2/512'}"


def controller_pids(home: Path) -> list[int]:
    """The spotrun processes of this home on the controller side."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if not is_driver(argv):
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SPOTRUN_HOME={home}".encode() in environ:
            found.append(int(proc.name))
    return found


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def ledger_metrics(home: Path) -> dict[str, dict[str, float]]:
    with sqlite3.connect(home / "ledger.db") as db:
        rows = db.execute("SELECT id, state, last_metrics_json FROM runs").fetchall()
    return {run_id: json.loads(m) if m else {} for run_id, state, m in rows if state == "running"}


@dataclass
class Round:
    mode: str
    rss_mb: float = 0.0
    cpu_pct: float = 0.0
    lags_s: list[float] = field(default_factory=list)
    processes: int = 0


def one_round(mode: str, count: int, window_s: float, home: Path, lab: Lab) -> Round:
    env = {**os.environ, **lab.config.env(), "SPOTRUN_HOME": str(home), "PYTHONPATH": str(REPO)}
    config = lab.config.write_config(home)
    config.write_text(f'controller = "{mode}"\n' + config.read_text())
    argv = [sys.executable, "-m", "spotrun", "launch", "--cmd", JOB, "--cloud", "aws", "-d"]
    for _ in range(count):
        subprocess.run(argv, env=env, capture_output=True, cwd=REPO, check=True, timeout=300)
    deadline = time.monotonic() + 600
    while len([m for m in ledger_metrics(home).values() if m]) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{mode}: the runs did not all report a metric in 10 minutes")
        time.sleep(0.2)
    out = Round(mode)
    pids = controller_pids(home)
    out.processes = len(pids)
    seen = {run_id: m.get("step") for run_id, m in ledger_metrics(home).items()}
    samples = []
    cpu_before, started = cpu_s(pids), time.monotonic()
    while time.monotonic() - started < window_s:
        now = time.time()
        for run_id, metrics in ledger_metrics(home).items():
            if metrics.get("step") != seen.get(run_id):
                seen[run_id] = metrics.get("step")
                out.lags_s.append(now - float(metrics["written_at"]))
        samples.append(rss_mb(pids))
        time.sleep(0.2)
    out.cpu_pct = 100.0 * (cpu_s(pids) - cpu_before) / (time.monotonic() - started)
    out.rss_mb = statistics.median(samples)
    end_round(home, lab, pids)
    return out


def end_round(home: Path, lab: Lab, pids: list[int]) -> None:
    """Kill the round's controller side and terminate its instances (a bench need not stop
    nicely)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    live = [i["InstanceId"] for i in lab.instances(states=("pending", "running"))]
    if live:
        lab.ec2.terminate_instances(InstanceIds=live)
        lab.hosts.sync()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument(
        "--modes", default="one,per-run", help="which sides to measure (per-run: 1 process/run)"
    )
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the lab's hosts and the round's controller are ended
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = [m for m in ("one", "per-run") if m in args.modes.split(",")]
    print(cpu_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.runs} runs per round")
    results: dict[str, list[Round]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="sr-bench-", dir="/tmp") as scratch:
        root = Path(scratch)
        with Lab(root / "lab", bucket=False, host_nice=19, spot_pool=None) as lab:
            for i in range(args.repeats):
                order = modes if i % 2 == 0 else modes[::-1]
                for mode in order:
                    done = one_round(mode, args.runs, args.window_s, root / f"{mode}-{i}", lab)
                    results[mode].append(done)
                    lag = statistics.median(done.lags_s) if done.lags_s else float("nan")
                    print(
                        f"round {i + 1} {mode:>7}: {done.processes} process(es), "
                        f"{done.rss_mb:7.1f} MB resident, {done.cpu_pct:5.1f}% of one core, "
                        f"sync lag median {lag:.2f} s max {max(done.lags_s, default=0):.2f} s"
                    )
    print(f"\nmedians over {args.repeats} round(s) of {args.runs} concurrent lab runs:")
    print(f"{'':>8} {'processes':>9} {'resident MB':>12} {'CPU % of a core':>16} {'lag s':>6}")
    for mode, rounds in results.items():
        lags = [x for r in rounds for x in r.lags_s]
        print(
            f"{mode:>8} {statistics.median(r.processes for r in rounds):>9.0f} "
            f"{statistics.median(r.rss_mb for r in rounds):>12.1f} "
            f"{statistics.median(r.cpu_pct for r in rounds):>16.1f} "
            f"{statistics.median(lags) if lags else float('nan'):>6.2f}"
        )
    if len(modes) == 2:
        one, per = results["one"], results["per-run"]
        ratio = statistics.median(r.rss_mb for r in per) / statistics.median(r.rss_mb for r in one)
        print(f"memory: per-run supervisors hold {ratio:.1f}x the one controller's")
    print(cpu_line())
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
