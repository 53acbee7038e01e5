"""The controller's home: this machine, or a host of the user's (`controller up --on ssh://`).

`up` checks that the host answers (its host key pinned on first use), pushes spotrun's code
there (the same content-named bundle an instance gets), checks that the host's python has
spotrun's dependencies, copies this home's config.toml (never credentials: the host uses its
own AWS credentials or instance role) and records the host in SPOTRUN_HOME/remote.json.
`status` and `down` describe and end the controller wherever it lives; on the host they run
as the same commands with the host's home, which is local there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cloud import controller_machines as machines
from spotrun.core.config import Settings
from spotrun.core.errors import RemoteError, StateError, UsageError
from spotrun.core.lazy import lazy_module
from spotrun.core.locks import lock_is_held
from spotrun.core.money import show_usd_per_hour
from spotrun.core.rundir import HOME_VAR
from spotrun.core.waiting import wait_until
from spotrun.drive.home import lock_path, running_pid
from spotrun.remote.provision import code_bundle
from spotrun.remote_controller import connection as hostrec
from spotrun.remote_controller import record as records
from spotrun.remote_controller.record import ControllerHost, SshTarget
from spotrun.remote_controller.ssh_binary import SshBinaryRunner
from spotrun.remote_controller.ssh_probe import probe, wait_for_ssh
from spotrun.remote_controller.status import (
    ControllerStatus,
    controller_status,
    local_status,
    version_here,
)
from spotrun.store.sweeps import SweepStore

if TYPE_CHECKING:
    from spotrun.service import runs as api
    from spotrun.service import sweeps as sweep_service
else:
    # the run and sweep machinery (~0.1 s, libtmux): only `down` stops runs, not up or status
    api = lazy_module("spotrun.service.runs")
    sweep_service = lazy_module("spotrun.service.sweeps")

__all__ = ["ControllerStatus", "controller_status", "controller_up", "controller_down"]
CLOUD = "aws"  # the cloud `controller up --on aws` makes the controller's instance on

# What the controller imports, by module, with the name pip installs it by.
DEPENDENCIES: dict[str, str] = {
    "boto3": "boto3",
    "botocore": "botocore",
    "paramiko": "paramiko",
    "cryptography": "cryptography",
    "typer": "typer",
    "rich": "rich",
    "pydantic": "pydantic",
    "yaml": "PyYAML",
    "optuna": "optuna",
    "numpy": "numpy",
}
Log = Callable[[str], None]


@dataclass(frozen=True)
class UpResult:
    record: ControllerHost
    pushed_code: bool
    copied_config: bool
    record_path: Path
    restarted_pid: int | None = None  # the controller that ran there before, ended for this code


def _quiet(_line: str) -> None:
    return None


def controller_up(
    settings: Settings,
    on: str,
    *,
    key_file: Path | None = None,
    python: str | None = None,
    remote_home: str | None = None,
    region: str | None = None,
    instance_type: str | None = None,
    idle_stop_s: float | None = None,
    log: Log = _quiet,
) -> UpResult:
    """Make the host behind `on` (ssh://[USER@]HOST[:PORT], or `aws`: an on-demand instance
    of spotrun's own, which stops itself after `idle_stop_s` idle, by default
    aws.controller_idle_stop_s; 0: never) this home's controller."""
    records.private_home(settings.home)  # before the host's key pin is written there
    if on == "aws":
        if idle_stop_s is None:
            idle_stop_s = machines.default_idle_stop_s(on, settings)
        return _up_on_aws(settings, python, remote_home, region, instance_type, idle_stop_s, log)
    return _up_on_ssh(settings, on, key_file, python or "python3", remote_home, log, {})


def _up_on_aws(
    settings: Settings,
    python: str | None,
    remote_home: str | None,
    region: str | None,
    instance_type: str | None,
    idle_stop_s: float,
    log: Log,
) -> UpResult:
    """Start the controller's instance, then make it the controller as any ssh host, and
    tell it its idle stop; an instance that does not become one is terminated (nothing is
    left billing)."""
    known = records.load_record(settings.home)
    if known is not None:
        raise StateError(
            f"this home's controller lives on {known.where}; its runs and sweeps are there",
            hint="`spotrun controller down` first (--force stops what is live), then up again",
        )
    local_live = _local_live(settings)
    if local_live:
        raise StateError(
            f"{len(local_live)} run(s) or sweep(s) are live under this machine's controller",
            hint="let them end (or stop them) before moving the controller to another host",
        )
    region = region or machines.default_region(CLOUD, settings)
    log(f"starting the controller's on-demand instance in {region} ...")
    made = machines.launch(CLOUD, settings, region, instance_type, settings.home / "ssh")
    price = show_usd_per_hour(made.usd_per_hour) if made.usd_per_hour else "price unknown"
    log(f"{made.instance_id} ({made.instance_type}, {price}) runs at {made.address}")
    target = SshTarget(made.ssh_user, made.address, made.ssh_port)
    extra: dict[str, Any] = {
        "kind": CLOUD,
        "instance_id": made.instance_id,
        "region": region,
        "instance_type": made.instance_type,
        "usd_per_hour": made.usd_per_hour,
        "resource_id": made.resource_id,
        "disk_gb": made.disk_gb,
        "idle_stop_s": idle_stop_s,
    }
    try:
        wait_for_ssh(settings.home, target, str(made.key_file), settings.run.ssh_timeout_s)
        result = _up_on_ssh(
            settings, target.url(), made.key_file, python or made.python, remote_home, log, extra
        )
        _tell_idle_stop(settings.home, result.record, log)
        return result
    except BaseException:
        log(f"terminating {made.instance_id}: it did not become the controller")
        machines.terminate(CLOUD, settings, region, made.instance_id, made.resource_id)
        raise


def _tell_idle_stop(home: Path, record: ControllerHost, log: Log) -> None:
    """The instance's idle stop, written in its home there, with its watcher started."""
    assert record.instance_id and record.region
    after = record.idle_stop_s or 0.0
    if after > 0:
        log(f"it stops itself after {after:.0f} s with nothing live and no command")
    args = ["controller", "idle-stop", "--instance-id", record.instance_id]
    args += ["--region", record.region, "--after", str(after)]
    SshBinaryRunner(home, record).run(record.spotrun_command(args), timeout_s=120).check(
        f"setting the idle stop on {record.where}"
    )


def _up_on_ssh(
    settings: Settings,
    on: str,
    key_file: Path | None,
    python: str,
    remote_home: str | None,
    log: Log,
    extra: dict[str, Any],
) -> UpResult:
    target = records.parse_ssh_url(on)
    known = records.load_record(settings.home)
    if known is not None and known.target != target:
        raise StateError(
            f"this home's controller lives on {known.where}; its runs and sweeps are there",
            hint="`spotrun controller down` first (--force stops what is live), then up again",
        )
    if key_file is not None and not key_file.is_file():
        raise UsageError(f"--key {key_file}: no such file")
    local_live = _local_live(settings)
    if local_live:
        raise StateError(
            f"{len(local_live)} run(s) or sweep(s) are live under this machine's controller "
            f"({', '.join(local_live[:5])})",
            hint="let them end (or stop them) before moving the controller to another host",
        )
    key = str(key_file.expanduser().resolve()) if key_file is not None else None
    home = settings.home
    log(f"connecting to {target.url()} ...")
    where = probe(home, target, key)
    host_home = remote_home or f"{where['home']}/.spotrun"
    if not host_home.startswith("/"):
        host_home = f"{where['home']}/{host_home}"
    bundle = code_bundle()
    code_dir = f"{host_home}/code/{bundle.digest}"
    record = ControllerHost(
        user=target.user,
        host=target.host,
        port=target.port,
        key_file=key,
        python=python,
        home=host_home,
        code_dir=code_dir,
        version=version_here(),
        since=time.time(),
        **extra,
    )
    runner = SshBinaryRunner(home, record)
    q = shlex.quote
    missing_python = runner.run(f"command -v {q(python)} >/dev/null", timeout_s=30)
    if not missing_python.ok:
        raise UsageError(
            f"the host {record.where} has no {python}",
            hint="install Python 3.10+ there, or name it with --python PATH",
        )
    _check_dependencies(runner, record)
    marker = f"{code_dir}/.complete"
    present = runner.run(f"test -f {q(marker)}", timeout_s=30).ok
    if not present:
        log(f"pushing spotrun's code ({bundle.size / 1e6:.1f} MB) to {code_dir} ...")
        archive = f"{code_dir}.tar.gz"
        runner.put(bundle.path, archive)
        runner.run(
            f"rm -rf {q(code_dir)} && mkdir -p {q(code_dir)} && tar -xzf {q(archive)} "
            f"-C {q(code_dir)} && rm -f {q(archive)} && touch {q(marker)}",
            timeout_s=300,
        ).check(f"unpacking spotrun's code on {record.where}")
    check = runner.run(record.spotrun_command(["--version"]), timeout_s=120)
    if not check.ok:
        tail = (check.stderr or check.stdout).strip().splitlines()[-3:]
        raise RemoteError(
            f"spotrun does not start on {record.where} with {python}: {' | '.join(tail)}"
        )
    copied = False
    if settings.config_path.is_file():
        log(f"copying {settings.config_path} to {host_home}/config.toml (no credentials)")
        runner.run(
            f"umask 077 && mkdir -p {q(host_home)} && chmod 700 {q(host_home)}", timeout_s=30
        ).check(f"making {HOME_VAR} there")
        runner.put(settings.config_path, f"{host_home}/config.toml", private=True)
        copied = True
    path = records.save_record(home, record)
    restarted = _restart_controller(runner, record, log)
    return UpResult(record, not present, copied, path, restarted)


def _restart_controller(runner: SshBinaryRunner, record: ControllerHost, log: Log) -> int | None:
    """A controller already running on the host may run other code: end it (its runs go on,
    as after any controller's end) and let a command start it again with this code."""
    answer = runner.run(record.spotrun_command(["controller", "status", "--json"]), timeout_s=120)
    try:
        pid = int(json.loads(answer.stdout).get("pid") or 0) if answer.ok else 0
    except (ValueError, TypeError, AttributeError):
        pid = 0
    if not pid:
        return None
    log(f"restarting the controller there (pid {pid}) with this code ...")
    runner.run(f"kill -TERM {pid}", timeout_s=30)
    wait_until(
        lambda: not runner.run(f"kill -0 {pid} 2>/dev/null", timeout_s=30).ok,
        timeout_s=60,
        what=f"the controller on {record.where} (pid {pid}) to exit",
    )
    runner.run(record.spotrun_command(["ls"]), timeout_s=120).check(
        f"starting the controller on {record.where} again"
    )  # any command starts the controller when something is live
    return pid


def _check_dependencies(runner: SshBinaryRunner, record: ControllerHost) -> None:
    probe = (
        "import importlib.util, sys; "
        f"names = {sorted(DEPENDENCIES)!r}; "
        "print(sys.version_info >= (3, 10)); "
        "print(' '.join(n for n in names if importlib.util.find_spec(n) is None))"
    )
    result = runner.run(f"{shlex.quote(record.python)} -c {shlex.quote(probe)}", timeout_s=120)
    result.check(f"checking {record.python} on {record.where}")
    lines = result.stdout.strip().splitlines()
    if not lines or lines[0] != "True":
        raise UsageError(
            f"{record.python} on {record.where} is older than Python 3.10",
            hint="name a newer one with --python PATH",
        )
    missing = lines[1].split() if len(lines) > 1 else []
    if missing:
        packages = " ".join(DEPENDENCIES[m] for m in missing)
        raise UsageError(
            f"{record.python} on {record.where} lacks spotrun's dependencies: {packages}",
            hint=f"install them there: `{record.python} -m pip install {packages}`",
        )


def _local_live(settings: Settings) -> list[str]:
    status = local_status(settings)
    return status.live_runs + status.live_sweeps


# -------------------------------------------------------------------- down
@dataclass(frozen=True)
class DownResult:
    where: str
    stopped: list[str]
    controller_pid: int | None
    forgot: bool
    output: str = ""


def local_down(settings: Settings, *, force: bool, log: Log = _quiet) -> DownResult:
    """End this machine's controller: refused while something is live unless `force`, which
    stops every live sweep and run first (nothing is left billing)."""
    status = local_status(settings)
    live = status.live_runs + status.live_sweeps
    if live and not force:
        raise StateError(
            f"{len(live)} run(s) or sweep(s) are live: {', '.join(live[:8])}",
            hint="stop them first, or `spotrun controller down --force` stops them all",
        )
    stopped: list[str] = []
    if live:
        stopped = _stop_everything(settings, log)
    pid = running_pid(settings)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        wait_until(
            lambda: not lock_is_held(lock_path(settings), pid),
            timeout_s=60,
            what=f"the controller (pid {pid}) to exit",
        )
    return DownResult("this machine", stopped, pid, False)


def _stop_everything(settings: Settings, log: Log) -> list[str]:
    stopped: list[str] = []
    ledger = api.open_ledger(settings)
    try:
        for sweep in SweepStore(ledger).live():
            log(f"stopping sweep {sweep.name} ...")
            with contextlib.suppress(StateError):  # it ended meanwhile
                sweep_service.stop_sweep(ledger, sweep.id)
            stopped.append(f"sweep {sweep.name}")
        for run in ledger.active_runs():
            log(f"stopping run {run.name} ...")
            with contextlib.suppress(StateError):
                api.stop(ledger, run.id)
            stopped.append(run.name)
    finally:
        ledger.close()
    return stopped


def controller_down(settings: Settings, *, force: bool, log: Log = _quiet) -> DownResult:
    record = records.load_record(settings.home)
    if record is None:
        return local_down(settings, force=force, log=log)
    if record.kind == "aws" and record.instance_id and record.region and record.resource_id:
        state = machines.describe(record.kind, settings, record.region, record.instance_id).state
        if state in ("stopping", "stopped"):
            # it stopped itself because nothing was live: nothing to stop there, no start
            log(f"{record.instance_id} is stopped (idle); terminating it ...")
            _terminate_instance(settings, record)
            return DownResult(record.where, [], None, True)
    runner = SshBinaryRunner(settings.home, record)
    args = ["controller", "down", "--json", *(["--force"] if force else [])]
    log(f"ending the controller on {record.where} ...")
    try:
        result = runner.run(record.spotrun_command(args), timeout_s=1800)
    except RemoteError as exc:
        return _down_unreachable(settings, record, force=force, why=exc.message, log=log)
    if result.exit_code == 255:  # ssh's own failure: the host did not answer
        why = result.stderr.strip().splitlines()[-1:] or ["ssh failed"]
        return _down_unreachable(settings, record, force=force, why=why[0], log=log)
    if not result.ok:
        said = [line for line in result.stderr.strip().splitlines() if line.strip()]
        message = said[-1] if said else f"exit code {result.exit_code}"
        raise StateError(
            f"the controller on {record.where} stays: {message.removeprefix('error: ')}"
        )
    there = json.loads(result.stdout or "{}")
    # nothing is live there now: the launches' staged task files and workdirs can go
    runner.run(f"rm -rf {shlex.quote(record.home + '/staging')}", timeout_s=300)
    hostrec.close_shared_connection(settings.home, record)
    if record.kind == "aws" and record.instance_id and record.region and record.resource_id:
        log(f"terminating the controller instance {record.instance_id} ...")
        _terminate_instance(settings, record)
    records.forget_record(settings.home)
    return DownResult(
        record.where, list(there.get("stopped", [])), there.get("controller_pid"), True
    )


def _down_unreachable(
    settings: Settings, record: records.ControllerHost, *, force: bool, why: str, log: Log
) -> DownResult:
    """`down` when the controller host does not answer. An ssh host is the user's own machine:
    nothing here can end it. A controller instance bills until terminated: with --force it is
    terminated anyway (its runs' instances go on under their agents, which end each job at
    its end's grace, its deadline or when it stops progressing)."""
    if record.kind != "aws" or not (record.instance_id and record.region and record.resource_id):
        raise StateError(
            f"the controller on {record.where} does not answer ({why})",
            hint="bring the host back and run `spotrun controller down` again",
        )
    if not force:
        raise StateError(
            f"the controller instance {record.instance_id} does not answer ({why})",
            hint="`spotrun controller down --force` terminates it anyway; its runs' instances "
            "are then ended by their own agents",
        )
    log(f"{record.where} does not answer; terminating {record.instance_id} anyway ...")
    hostrec.close_shared_connection(settings.home, record)
    _terminate_instance(settings, record)
    return DownResult(record.where, [], None, True)


def _terminate_instance(settings: Settings, record: records.ControllerHost) -> None:
    """Terminate the controller instance with its key pair and security group, and forget
    it; a group EC2 still holds is named with where to delete it."""
    assert record.instance_id and record.region and record.resource_id
    left = machines.terminate(
        record.kind, settings, record.region, record.instance_id, record.resource_id
    )
    records.forget_record(settings.home)
    if left:
        raise StateError(
            f"{record.instance_id} is terminated but its security group {', '.join(left)} "
            "could not be deleted yet",
            hint=f"delete it in the EC2 console (tag spotrun:run-id={record.resource_id})",
        )
