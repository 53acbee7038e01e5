"""Faults on this side of a live run (issue 38, points 1-8), replayed against real runs.

    sudo PYTHONPATH=. .venv/bin/python bench/local_faults.py [--only 1 --only 4 ...]

Each fault is done to a live run the way a user's machine or a job would do it: on the lab's
EC2 (moto + an sshd host per instance) for what crosses the wire, on the local cloud for what
happens on this machine alone. Root is needed for the read-only ledger (chattr +i) and the full
disk (a small tmpfs). Per fault it prints: runs lost (not succeeded, or gone from `ls`), healthy
instances terminated (instances beyond the first), files the job wrote that did not come home
(listed, beside the ones this machine cannot hold), and the seconds from the fault's end to the
run going on (the controller moving it again). Goal: 0, 0, only the unwritable ones, under 30 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._env import hardware_line  # noqa: E402
from spotlab import Lab  # noqa: E402
from spotlab.always_on import start_always_on_host, user_key  # noqa: E402
from spotrun.remote_controller.connection import close_shared_connection  # noqa: E402
from spotrun.remote_controller.record import load_record  # noqa: E402

ENDED = ("succeeded", "failed", "stopped")
# The lab's [aws] settings: a silent instance replaced after 4 s (default 60 s), so a local
# fault taken for silence shows within the bench's time.
LAB_SETTINGS = {"notice_poll_s": 0.5, "unreachable_s": 4.0}
# A long SPOTRUN_HOME: this machine's paths are then longer than the instance's, as a user's
# often are (/home/NAME/projects/... beside /root/.spotrun), so a deep path fits there only.
LONG = "h" * 150


@dataclass
class Row:
    fault: str
    where: str
    runs_lost: int = 0
    terminated: int = 0
    not_home: list[str] = field(default_factory=list)
    unwritable: list[str] = field(default_factory=list)  # what this machine cannot hold
    recover_s: float | None = None
    wrong: int = 0  # what else went wrong, per fault (said in the note): the goal is 0
    note: str = ""


@dataclass
class Home:
    """A SPOTRUN_HOME and the real CLI in child processes."""

    home: Path
    vars: dict[str, str]

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "spotrun", *args],
            capture_output=True,
            text=True,
            env=self.vars,
            timeout=timeout,
            cwd=REPO,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "spotrun", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.vars,
            cwd=REPO,
        )

    def launch(self, task: Path, *extra: str) -> str:
        proc = self.cli("launch", str(task), "-d", *extra)
        if proc.returncode != 0:
            raise RuntimeError(f"launch failed: {proc.stdout}{proc.stderr}")
        return proc.stdout.strip().splitlines()[0]

    def status(self, run_id: str) -> dict[str, Any] | None:
        proc = self.cli("status", run_id, "--json")
        if proc.returncode != 0:
            return None
        answer: dict[str, Any] = json.loads(proc.stdout)
        return answer

    def runs(self) -> list[dict[str, Any]]:
        proc = self.cli("ls", "--all", "--json")
        if proc.returncode != 0:
            return []
        listed: list[dict[str, Any]] = json.loads(proc.stdout)
        return listed

    def state(self, run_id: str) -> str | None:
        seen = self.status(run_id)
        return None if seen is None else str(seen["state"])

    def wait_state(self, run_id: str, states: tuple[str, ...], bound_s: float) -> str | None:
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            state = self.state(run_id)
            if state in states:
                return state
            time.sleep(0.3)
        return self.state(run_id)

    def run_dir(self, run_id: str) -> Path:
        return self.home / "runs" / run_id

    def stop_all(self) -> None:
        for run in self.runs():
            if run["state"] not in ENDED:
                self.cli("stop", run["id"])
        lock = self.home / "controller.lock"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(lock.read_text().split()[0]), signal.SIGKILL)


def make_home(root: Path, lab: Lab | None) -> Home:
    home = root / LONG / "home"
    tmux_dir = Path(tempfile.mkdtemp(prefix="sr-tmux-", dir="/tmp"))
    variables = {
        **os.environ,
        "SPOTRUN_HOME": str(home),
        "TMUX_TMPDIR": str(tmux_dir),
        "PYTHONPATH": str(REPO),
    }
    variables.pop("TMUX", None)
    if lab is not None:
        variables.update(lab.config.env())
        lab.config.write_config(home, **LAB_SETTINGS)
    return Home(home, variables)


def task_file(root: Path, name: str, script: str, *, outputs: str = "[results]") -> Path:
    """An own-command task: `script` (Python) run in a workdir, its `results` brought home."""
    proj = root / f"proj-{name}"
    proj.mkdir(parents=True, exist_ok=True)
    (proj / "job.py").write_text(script)
    task = root / f"{name}.yaml"
    task.write_text(
        f"name: {name}\n"
        "resources: {gpus: 0}\n"
        f"workdir: proj-{name}\n"
        f'run: "{sys.executable} job.py"\n'
        f"outputs: {outputs}\n"
        "max_hours: 1\n"
    )
    return task


def instances_beyond_first(seen: dict[str, Any] | None) -> int:
    return 0 if seen is None else max(0, len(seen.get("instances", [])) - 1)


def lost(seen: dict[str, Any] | None) -> int:
    return 0 if seen is not None and seen["state"] == "succeeded" else 1


# ------------------------------------------------------------------ 1 and 4: over the wire
WRITER = """\
import os, time
from pathlib import Path
results = Path("results"); results.mkdir(exist_ok=True)
written = []
def put(rel, text="x"):
    path = results / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    written.append(rel)
put("n" * 255)                       # a 255-byte name: fine here, one more byte at home is not
put("flip/inner.txt")                # a folder that later becomes a file
deep = "/".join(["d" * 60] * {depth})   # fits under the instance's PATH_MAX, not under home's
put(deep + "/leaf.txt")
time.sleep(6)                        # several polls bring the first versions home
(results / "flip/inner.txt").unlink(); (results / "flip").rmdir()
written.remove("flip/inner.txt"); put("flip", "now a file")
put("ok.txt", "fine")
(results / "manifest.json").write_text(__import__("json").dumps(written))
time.sleep(4)
"""

SWAPPER = """\
import os, time
from pathlib import Path
results = Path("results"); results.mkdir(exist_ok=True)
swap = results / "swap"
end = time.monotonic() + 8
while time.monotonic() < end:        # a file, then a link to /etc, then a file again ...
    tmp = results / "swap.new"
    tmp.write_text("data"); os.replace(tmp, swap)
    time.sleep(0.05)
    os.symlink("/etc", results / "swap.link"); os.replace(results / "swap.link", swap)
    time.sleep(0.05)
tmp = results / "swap.new"; tmp.write_text("data"); os.replace(tmp, swap)
(results / "ok.txt").write_text("fine")
(results / "manifest.json").write_text('["swap", "ok.txt"]')
time.sleep(3)
"""


def files_not_home(run_dir: Path) -> tuple[list[str], list[str]]:
    """The files the job listed as written that are not here, and which of them are too long
    for this machine to hold at all (NAME_MAX or PATH_MAX with the run folder's prefix)."""
    results = run_dir / "workdir" / "results"
    try:
        written = json.loads((results / "manifest.json").read_text())
    except (OSError, ValueError):
        return ["manifest.json (and so every file)"], []
    missing, unwritable = [], []
    for rel in written:
        path = results / rel
        try:
            ok = path.is_file()
        except OSError:
            ok = False
        if not ok:
            missing.append(rel if len(rel) < 60 else rel[:24] + f"...({len(rel)} bytes)")
            if not can_hold(results, rel):
                unwritable.append(missing[-1])
    return missing, unwritable


def can_hold(folder: Path, rel: str) -> bool:
    """Whether this machine could hold a file at folder/rel at all: each name within NAME_MAX,
    the path within PATH_MAX, no folder here by its name and no file where a folder goes."""
    name_max = os.pathconf(str(folder), "PC_NAME_MAX")
    path = folder / rel
    if any(len(part) > name_max for part in rel.split("/")):
        return False
    if len(str(path)) >= os.pathconf(str(folder), "PC_PATH_MAX"):
        return False
    if path.is_dir():
        return False
    return not any(parent.is_file() for parent in path.parents)


def fault_1(work: Path) -> Row:
    row = Row("1 local write error (long name, folder->file, deep path)", "lab")
    with Lab(Path(tempfile.mkdtemp(prefix="sr-lab-", dir="/tmp"))) as lab:
        home = make_home(work, lab)
        remote_prefix = len("/root/.spotrun/runs/123456789012/workdir/results/")
        depth = (4000 - remote_prefix) // 61
        task = task_file(work, "writer", WRITER.replace("{depth}", str(depth)))
        try:
            run_id = home.launch(task, "--cloud", "aws")
            home.wait_state(run_id, ENDED, 240)
            seen = home.status(run_id)
            row.runs_lost = lost(seen)
            row.terminated = instances_beyond_first(seen)
            row.not_home, row.unwritable = files_not_home(home.run_dir(run_id))
            row.note = "" if seen is None else str(seen.get("message", ""))[:70]
        finally:
            home.stop_all()
    return row


def fault_4(work: Path) -> Row:
    row = Row("4 a file swapped with a link to /etc", "lab")
    with Lab(Path(tempfile.mkdtemp(prefix="sr-lab-", dir="/tmp"))) as lab:
        home = make_home(work, lab)
        task = task_file(work, "swapper", SWAPPER)
        try:
            run_id = home.launch(task, "--cloud", "aws")
            home.wait_state(run_id, ENDED, 240)
            seen = home.status(run_id)
            row.runs_lost = lost(seen)
            row.terminated = instances_beyond_first(seen)
            row.not_home, row.unwritable = files_not_home(home.run_dir(run_id))
            leaked = [
                str(p.relative_to(home.run_dir(run_id)))
                for p in home.run_dir(run_id).rglob("*")
                if p.name in ("passwd", "hostname", "os-release")
            ]
            row.wrong = len(leaked)
            row.note = f"wrong: files from the instance's /etc here ({len(leaked)})"
        finally:
            home.stop_all()
    return row


# ------------------------------------------------------------------ 2, 3, 6, 8: this machine
WAITER = """\
import time
from pathlib import Path
while not Path("go").exists():
    time.sleep(0.1)
Path("results").mkdir(exist_ok=True)
Path("results/done.txt").write_text("done")
"""

HOSTILE_METRICS = """\
import json, os
from pathlib import Path
run_dir = Path(os.environ["SPOTRUN_RUN_DIR"])
with open(run_dir / "metrics.jsonl", "a") as fh:
    fh.write("[" * 100000 + "]" * 100000 + "\\n")
    fh.write(json.dumps({"epoch": 1, "step": 1, "train_loss": 0.5}) + "\\n")
Path("results").mkdir(exist_ok=True)
Path("results/done.txt").write_text("done")
"""


def controller_pid(home: Home) -> int | None:
    try:
        return int((home.home / "controller.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def release_and_time(home: Home, run_id: str, row: Row, since: float) -> None:
    """Let the waiting job end now; the time until the run has moved on (ended)."""
    (home.run_dir(run_id) / "workdir" / "go").touch()
    state = home.wait_state(run_id, ENDED, 180)
    if state in ENDED:
        row.recover_s = time.monotonic() - since
    seen = home.status(run_id)
    row.runs_lost = lost(seen)
    row.terminated = instances_beyond_first(seen)
    done = home.run_dir(run_id) / "workdir" / "results" / "done.txt"
    row.not_home = [] if done.exists() else ["results/done.txt"]
    if seen is not None and not row.note:
        row.note = str(seen.get("message", ""))[:70]


def fault_2(work: Path) -> Row:
    row = Row("2 ledger read-only while the controller starts", "local")
    home = make_home(work, None)
    ledger = home.home / "ledger.db"
    task = task_file(work, "waiter2", WAITER)
    try:
        run_id = home.launch(task, "--cloud", "local")
        home.wait_state(run_id, ("running",), 60)
        pid = controller_pid(home)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["chattr", "+i", str(ledger)], check=True)
        try:
            home.cli("ls")  # any command starts the home's controller again
            time.sleep(6)
        finally:
            subprocess.run(["chattr", "-i", str(ledger)], check=True)
        release_and_time(home, run_id, row, time.monotonic())
    finally:
        subprocess.run(["chattr", "-i", str(ledger)], check=False)
        home.stop_all()
    return row


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[None]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fault_3(work: Path) -> Row:
    row = Row("3 the disk under SPOTRUN_HOME full for a while", "local")
    disk = work / "disk"
    with small_disk(disk, "64m"):
        home = make_home(disk, None)
        task = task_file(work, "waiter3", WAITER)
        try:
            run_id = home.launch(task, "--cloud", "local")
            home.wait_state(run_id, ("running",), 60)
            filler = disk / "filler"
            subprocess.run(
                ["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True, check=False
            )
            home.cli("ls")  # a command that writes, meeting the full disk
            time.sleep(6)
            filler.unlink()
            release_and_time(home, run_id, row, time.monotonic())
        finally:
            home.stop_all()
    return row


def fault_6(work: Path) -> Row:
    row = Row("6 a hostile metrics line (100,000 nested brackets)", "local")
    home = make_home(work, None)
    task = task_file(work, "metrics6", HOSTILE_METRICS)
    try:
        run_id = home.launch(task, "--cloud", "local")
        home.wait_state(run_id, ENDED, 120)
        seen = home.status(run_id)
        row.runs_lost = lost(seen)
        row.terminated = instances_beyond_first(seen)
        row.note = "" if seen is None else str(seen.get("message", ""))[:70]
    finally:
        home.stop_all()
    return row


def fault_8(work: Path) -> Row:
    row = Row("8 random bytes over ledger.db-wal's frames during a run", "local")
    home = make_home(work, None)
    task = task_file(work, "waiter8", WAITER)
    try:
        run_id = home.launch(task, "--cloud", "local")
        home.wait_state(run_id, ("running",), 60)
        wal = home.home / "ledger.db-wal"
        rng = random.Random(8)
        with open(wal, "r+b") as fh:  # every frame after the WAL's header
            fh.seek(32)
            fh.write(rng.randbytes(wal.stat().st_size - 32))
        damaged = time.monotonic()
        said = home.cli("ls")
        if said.returncode != 0:  # the ledger is damaged: do what the message says
            words = (said.stdout + said.stderr).strip().splitlines()
            row.note = f"ls: {words[-1][:40] if words else '(nothing)'}...; moved aside; "
            for path in home.home.glob("ledger.db*"):
                os.replace(path, path.with_name(path.name + ".bad"))
        listed = any(r["id"] == run_id for r in home.runs())
        row.wrong = 0 if listed else 1
        row.note += "listed by ls again" if listed else "wrong: ls does not know the run (1)"
        release_and_time(home, run_id, row, damaged)
        if not listed:
            row.runs_lost = 1
    finally:
        home.stop_all()
    return row


# ------------------------------------------------------------------ 5 and 7
def watch_cmdlines(secret: bytes, showing: set[int], done: threading.Event) -> None:
    """The processes whose command line holds `secret`, the user's own `spotrun launch` (this
    process's child) aside."""
    while not done.wait(0.02):
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if secret in cmdline.read_bytes():
                    stat = (cmdline.parent / "stat").read_text()
                    parent = int(stat.rsplit(")", 1)[1].split()[1])
                    if parent != os.getpid():
                        showing.add(int(cmdline.parent.name))


def fault_5(work: Path) -> Row:
    """--env with the controller on another host: does a value reach a command line there?"""
    row = Row("5 --env value on the controller host's command lines", "lab")
    secret = f"canary-{random.randrange(10**9)}"
    with Lab(Path(tempfile.mkdtemp(prefix="sr-lab-", dir="/tmp"))) as lab:
        home = make_home(work, lab)
        home.vars = {k: v for k, v in home.vars.items() if not k.startswith("AWS_")}
        key = work / "laptop_key"
        host = start_always_on_host(lab, user_key(key), lab.root / "always-on")
        try:
            url = f"ssh://root@{host.address}:{host.spec.port}"
            up = home.cli("controller", "up", "--on", url, "--key", str(key), "--python",
                          sys.executable)  # fmt: skip
            if up.returncode != 0:
                raise RuntimeError(f"controller up failed: {(up.stdout + up.stderr)[-200:]}")
            task = task_file(work, "envjob", WAITER)
            # Every process's command line (this machine's and the hosts': they share /proc),
            # looked at every 20 ms from before the launch until the job runs.
            watching = threading.Event()
            showing: set[int] = set()
            watcher = threading.Thread(
                target=watch_cmdlines, args=(secret.encode(), showing, watching), daemon=True
            )
            watcher.start()
            try:
                run_id = home.launch(task, "--cloud", "aws", "--env", f"API_TOKEN={secret}")
                home.wait_state(run_id, ("running",) + ENDED, 180)
            finally:
                watching.set()
                watcher.join()
            row.wrong = len(showing)
            row.note = f"wrong: processes showing the value in /proc/*/cmdline ({row.wrong})"
            row.runs_lost = 1 if home.state(run_id) == "failed" else 0
            home.cli("stop", run_id)
        finally:
            record = load_record(home.home)
            if record is not None:
                close_shared_connection(home.home, record)
            host.stop()
    return row


def before_spotrun_ran(code: int, said: str) -> bool:
    """A Ctrl-C the interpreter took in its own start-up (site's .pth files, runpy), before
    spotrun's way in (spotrun/cli/entry.py main, whose guard covers every spotrun module):
    Python's traceback of a KeyboardInterrupt whose frames hold no spotrun source file but
    __main__'s first line, the import of that way in."""
    if code == 130 or not said.rstrip().endswith("KeyboardInterrupt"):
        return False
    frames = [line for line in said.splitlines() if line.lstrip().startswith('File "')]
    ours = [line for line in frames if f"{os.sep}spotrun{os.sep}" in line]
    return all(f"spotrun{os.sep}__main__.py" in line for line in ours)


def fault_7(work: Path) -> Row:
    row = Row("7 Ctrl-C early in a foreground launch (12 moments)", "local")
    home = make_home(work, None)
    task = task_file(work, "short7", "import time; time.sleep(1)\n", outputs="[]")
    silent = half_made = unstarted = in_startup = 0
    try:
        for i in range(12):
            name = f"ctrlc-{i}"
            proc = home.popen("launch", str(task), "--cloud", "local", "--name", name)
            time.sleep(0.08 * i)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
            said = out.lower()
            run = next((r for r in home.runs() if r["name"] == name), None)
            if run is None and proc.returncode == -signal.SIGINT and not out:
                unstarted += 1  # ended by the signal before Python could handle one
                continue
            if run is None and before_spotrun_ran(proc.returncode, out):
                in_startup += 1  # the interpreter's start-up (site, runpy): no spotrun code
                continue
            if run is None:
                if "nothing" not in said and "not launched" not in said:
                    silent += 1
                continue
            if not home.run_dir(run["id"]).is_dir():
                half_made += 1
            if home.wait_state(run["id"], ENDED, 120) != "succeeded":
                row.runs_lost += 1
            if "detach" not in said and "goes on" not in said and "stop it" not in said:
                silent += 1
        log = home.home / "controller.log"
        errors = log.read_text().count("FileNotFoundError") if log.exists() else 0
        row.wrong = half_made + silent + errors
        row.note = (
            f"wrong: half-made runs {half_made}, no word of what was left {silent}, "
            f"FileNotFoundError in controller.log {errors}; before any spotrun code ran: "
            f"{unstarted} before Python's own handler, {in_startup} in its start-up"
        )
    finally:
        home.stop_all()
    return row


FAULTS: dict[str, Callable[[Path], Row]] = {
    "1": fault_1,
    "2": fault_2,
    "3": fault_3,
    "4": fault_4,
    "5": fault_5,
    "6": fault_6,
    "7": fault_7,
    "8": fault_8,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append", help="fault numbers (1-8)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root: chattr for the read-only ledger, mount for the full disk")
        return 2
    print(hardware_line(), flush=True)
    rows = []
    for number, fault in FAULTS.items():
        if args.only and number not in args.only:
            continue
        work = Path(tempfile.mkdtemp(prefix=f"sr-fault{number}-", dir="/tmp"))
        started = time.monotonic()
        try:
            row = fault(work)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            row = Row(f"{number} (could not run)", "-", note=f"{type(exc).__name__}: {exc}"[:90])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append(row)
        print(f"[fault {number}] done in {time.monotonic() - started:.0f} s", flush=True)
    print()
    header = (
        f"{'fault':<56} {'where':<6} {'lost':>4} {'terminated':>10} {'not home':>8} "
        f"{'of them unwritable':>18} {'recover s':>9} {'wrong':>5}  note"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        recover = "-" if row.recover_s is None else f"{row.recover_s:.1f}"
        print(
            f"{row.fault:<56} {row.where:<6} {row.runs_lost:>4} {row.terminated:>10} "
            f"{len(row.not_home):>8} {len(row.unwritable):>18} {recover:>9} {row.wrong:>5}  {row.note}"
        )
        for missing in row.not_home:
            print(f"{'':<8}not home: {missing}")
    ok = all(
        r.runs_lost == 0
        and r.terminated == 0
        and len(r.not_home) == len(r.unwritable)
        and (r.recover_s is None or r.recover_s < 30)
        and r.wrong == 0
        for r in rows
    )
    print(
        "goal (0 lost, 0 terminated, only unwritable files missing, recover < 30 s, 0 wrong):", ok
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
