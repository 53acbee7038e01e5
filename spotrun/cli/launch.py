"""`spotrun launch`: a recipe, a task file or your own command, planned, launched, followed.

Registered on the app in spotrun/cli/main.py, as every command module here is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from spotrun.cli.common import Cloud
from spotrun.cli.complete import complete_launchable
from spotrun.cli.follow_view import detached_note, follow_run
from spotrun.cli.lazy import lazy_module
from spotrun.cli.library import api, load_settings, supervisor
from spotrun.cli.notify import Notices, notify_on_option, notify_option
from spotrun.cli.render import err, out
from spotrun.core.capacity_note import MAX_CAPACITY_WAIT_S, SPOT_POLICIES
from spotrun.core.durations import parse_duration
from spotrun.core.errors import UsageError
from spotrun.core.interrupts import caused_by_interrupt
from spotrun.store.name_reuse import NAME_EVENT

if TYPE_CHECKING:
    from spotrun.core import launch_request as requests
    from spotrun.jobs import own_command, taskfile
    from spotrun.service import tracker_env as trackers
    from spotrun.store.ledger import Ledger
else:  # pydantic's models (~0.1 s) stay off `launch -h` and `sweep run -h`
    requests = lazy_module("spotrun.core.launch_request")
    own_command = lazy_module("spotrun.jobs.own_command")
    taskfile = lazy_module("spotrun.jobs.taskfile")
    trackers = lazy_module("spotrun.service.tracker_env")  # the library stays off `launch -h` too


def job_environment(env_flags: list[str], env_files: list[str] | None = None) -> dict[str, str]:
    """A job's own environment: the trackers' variables of this shell, then each --env-file,
    then --env. Says which names it carries from the shell (names only: values such as
    WANDB_API_KEY are never printed)."""
    carried = trackers.tracker_env(os.environ)
    if carried:
        sys.stderr.write(f"carrying {', '.join(carried)} into the job's environment\n")
        sys.stderr.flush()
    from_files: dict[str, str] = {}
    for path in env_files or []:
        from_files.update(own_command.read_env_file(path))
    return {**carried, **from_files, **own_command.parse_envs(env_flags)}


def launch(
    target: str | None = typer.Argument(
        None,
        metavar="[RECIPE|TASK.yaml]",
        help="a recipe name, or a task file (or use --cmd)",
        autocompletion=complete_launchable,
    ),
    cmd: str | None = typer.Option(None, "--cmd", help="your own command (run with bash)"),
    workdir: str | None = typer.Option(
        None, "--workdir", help="folder shipped to the instance (.gitignore respected)"
    ),
    setup: str | None = typer.Option(None, "--setup", help="bash run once per instance first"),
    env_: list[str] = typer.Option(
        [],
        "--env",
        metavar="KEY=VALUE",
        help="in the job's environment (W&B's and MLflow's variables come along by themselves)",
    ),
    env_file: list[str] = typer.Option(
        [], "--env-file", metavar="FILE", help="KEY=VALUE lines for the job's environment"
    ),
    cloud: Cloud | None = typer.Option(
        None, "--cloud", help="where to run; default from config (local)"
    ),
    gpus: int | None = typer.Option(None, "--gpus", help="GPUs per node (default: the recipe's)"),
    nodes: int | None = typer.Option(
        None, "--nodes", help="instances trained on together with torchrun (aws; default 1)"
    ),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a recipe key"),
    name: str | None = typer.Option(None, "--name", help="a name to refer to the run by"),
    detach: bool = typer.Option(
        False, "--detach", "-d", help="print the run id and return at once"
    ),
    max_cost: float | None = typer.Option(None, "--max-cost", metavar="USD", help="budget cap"),
    max_hours: float | None = typer.Option(None, "--max-hours", help="wall-time cap"),
    gpu_model: str | None = typer.Option(None, "--gpu-model", help="e.g. A10G, L4, A100"),
    instance_type: str | None = typer.Option(None, "--instance-type", help="e.g. g5.xlarge"),
    region: str | None = typer.Option(None, "--region", help="cloud region (aws)"),
    regions: str | None = typer.Option(
        None,
        "--regions",
        metavar="R1,R2",
        help="offers from each of these regions, the best ranked chosen (aws; each one of "
        "aws.regions when that lists any)",
    ),
    zone: str | None = typer.Option(None, "--zone", help="availability zone (aws)"),
    disk_gb: int | None = typer.Option(None, "--disk-gb", help="root volume size in GB (aws)"),
    wait_for_capacity: str | None = typer.Option(
        None,
        "--wait-for-capacity",
        metavar="DURATION",
        help="when no capacity is to be had, wait for it this long, asking again with "
        "backoff (e.g. 2h; never: fail at once); default from config",
    ),
    spot_policy: str | None = typer.Option(
        None,
        "--spot-policy",
        metavar="spot|auto|on-demand",
        help="auto: on-demand when spot cannot be had within the wait, spot again at the next "
        "replacement; default from config (spot)",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="check the plan and the cloud's permissions; launch nothing"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="show only the run's stages"),
    notify: list[str] = notify_option(),
    notify_on: list[str] = notify_on_option(),
) -> None:
    """Launch a recipe, a task file or your own command (--cmd) on the cheapest capacity that
    fits, and follow it to the end.

    \b
    Examples:
      spotrun launch digits-fast
      spotrun launch cifar10-fast --cloud aws --gpus 1 --max-cost 2
      spotrun launch --cmd "python train.py" --workdir .
      spotrun launch task.yaml --detach
    """
    # Ctrl-C at any moment says what it left behind: nothing, or a run that goes on detached.
    progress = LaunchProgress()
    try:
        settings = load_settings()
        notices = Notices.read(settings, notify, notify_on)  # checked before anything starts
        own = OwnJobFlags(cmd, workdir, setup, env_, env_file)
        own.check(target, set_)
        terms = CapacityTerms.read(settings, wait_for_capacity, spot_policy)
        request = requests.LaunchRequest(
            cloud=cloud.value if cloud else None,
            name=name,
            gpus=gpus,
            nodes=nodes,
            gpu_model=gpu_model,
            instance_type=instance_type,
            region=region,
            regions=region_list(regions) if regions is not None else None,
            zone=zone,
            disk_gb=disk_gb,
            max_cost_usd=max_cost,
            max_hours=max_hours,
            wait_for_capacity_s=terms.wait_s,
            spot_policy=terms.policy,
        )
        progress.ledger = ledger = api.open_ledger(settings)
        progress.run_id = api.new_run_id()
        chosen_cloud = cloud.value if cloud else settings.default_cloud
        # The run's supervisor starts now and gets ready (imports, cloud clients) while we plan.
        if not dry_run:
            progress.warm = supervisor.Prewarmed(settings, chosen_cloud)
        try:
            if own.wanted(target):
                prepared = own.prepare(settings, target, request)
            else:
                assert target is not None
                prepared = api.prepare_launch(
                    settings,
                    target,
                    request,
                    overrides=set_,
                    envs=own.job_env(),
                    dry_run=dry_run,
                )
        except BaseException:
            progress.cancel_warm()
            raise
        if prepared.spec.cloud != chosen_cloud:  # a task file chose its cloud
            progress.cancel_warm()
        if dry_run:
            passed = api.dry_run(settings, prepared)
            out.print(f"dry run on {prepared.spec.cloud}: {prepared.plan.reason}")
            if prepared.batch_line is not None:
                out.print(prepared.batch_line)
            out.print(f"permitted: {', '.join(passed)}; nothing was launched")
            if prepared.data_advice is not None:  # the plan stands; its data must move first
                raise prepared.data_advice.error()
            return
        try:
            notices.subscribe(ledger, progress.run_id)
        except BaseException:
            progress.cancel_warm()
            raise
        try:
            run = api.launch(ledger, prepared, prewarmed=progress.warm, run_id=progress.run_id)
        except BaseException:
            notices.forget_unlaunched(ledger, progress.run_id)
            raise
        if detach:
            for event in ledger.events(run.id):  # a follower shows them; here, said once
                if event.kind == NAME_EVENT:  # the name was an ended run's, now renamed
                    err.print(f"note: {event.message}", markup=False)
            sys.stdout.write(run.id + "\n")
            err.print(
                f"launched {run.name} ({run.id}) on {run.cloud}: {prepared.plan.reason}\n"
                f"follow it with `spotrun logs -f {run.name}`, "
                f"stop it with `spotrun stop {run.name}`"
            )
            return
        out.print(f"run {run.id}  {run.name}  on {run.cloud}")
        code = follow_run(ledger, run.id, out, err, quiet=quiet)
    except KeyboardInterrupt:
        raise typer.Exit(progress.interrupted()) from None
    except Exception as exc:
        if not caused_by_interrupt(exc):
            raise
        raise typer.Exit(progress.interrupted()) from None
    raise typer.Exit(code)


class LaunchProgress:
    """How far a launch got: what a Ctrl-C leaves behind, and says it left."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None
        self.run_id: str | None = None  # chosen before the run is recorded under it
        self.warm: supervisor.Prewarmed | None = None

    def cancel_warm(self) -> None:
        if self.warm is not None:
            self.warm.cancel()
            self.warm = None

    def interrupted(self) -> int:
        """Say what the interrupted launch left behind; its exit code."""
        run = None
        if self.ledger is not None and self.run_id is not None:
            # api.launch made the run whole (handed on) or left nothing of it
            run = api.find_run(self.ledger, self.run_id)
        if run is None:
            self.cancel_warm()
            err.print("\ninterrupted: nothing was launched", markup=False)
        else:
            err.print(
                f"\ninterrupted: {run.name} ({run.id}) was launched; {detached_note(run)}",
                markup=False,
            )
        return 130


class OwnJobFlags:
    """`launch`'s flags for your own command (--cmd, --workdir, --setup, --env, --env-file)."""

    def __init__(
        self,
        cmd: str | None,
        workdir: str | None,
        setup: str | None,
        envs: list[str],
        env_files: list[str],
    ) -> None:
        self.cmd, self.workdir, self.setup, self.envs = cmd, workdir, setup, envs
        self.env_files = env_files

    def wanted(self, target: str | None) -> bool:
        return self.cmd is not None or (target is not None and taskfile.is_task_file(target))

    def check(self, target: str | None, overrides: list[str]) -> None:
        if target is None and self.cmd is None:
            raise UsageError(
                "launch what? give a recipe, a task file or --cmd",
                hint='e.g. `spotrun launch digits-fast` or `spotrun launch --cmd "python t.py"`',
            )
        if target is not None and self.cmd is not None:
            raise UsageError(f"give either {target} or --cmd, not both")
        if self.wanted(target):
            if overrides:
                raise UsageError("--set overrides a recipe's keys; your own command has none")
            return
        given = [
            flag
            for flag, value in (("--workdir", self.workdir), ("--setup", self.setup))
            if value is not None
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)}: only with --cmd or a task file; a recipe runs spotrun's "
                "own trainer"
            )

    def job_env(self) -> dict[str, str]:
        """The job's own environment: the trackers' variables of this shell, then --env."""
        return job_environment(self.envs, self.env_files)

    def prepare(
        self, settings: Any, target: str | None, request: requests.LaunchRequest
    ) -> api.LaunchPlan:
        envs = self.job_env()
        limit = settings.workdir_max_mb
        if target is None:  # --cmd
            job = own_command.build_job(
                self.cmd,
                workdir=self.workdir,
                setup=self.setup,
                envs=envs,
                workdir_max_mb=limit,
            )
            label = own_command.DEFAULT_LABEL
        else:
            task = taskfile.load_task(Path(target))
            updates = {k: v for k, v in (("workdir", self.workdir), ("setup", self.setup)) if v}
            task = task.model_copy(update=updates)
            job = own_command.task_job(task, envs=envs, workdir_max_mb=limit)
            label = own_command.task_label(task.name)
            # the flags win; the task's name is the run's unless --name gives another
            asked = requests.LaunchRequest(
                name=task.name,
                max_cost_usd=task.max_cost,
                max_hours=task.max_hours,
                **task.resources.as_flags(),
            )
            request = request.over(asked)
        return api.prepare_job_launch(settings, job, request, label=label)


class CapacityTerms:
    """--wait-for-capacity and --spot-policy (or their config defaults), checked before
    anything is planned, then written into the run's spec and plan."""

    def __init__(self, wait_s: float, policy: str) -> None:
        self.wait_s, self.policy = wait_s, policy

    @classmethod
    def read(cls, settings: Any, wait: str | None, policy: str | None) -> CapacityTerms:
        wait_s = settings.wait_for_capacity_s
        if wait is not None:
            wait_s = parse_duration(wait, what="--wait-for-capacity")
            if wait_s > MAX_CAPACITY_WAIT_S:
                raise UsageError(
                    f"--wait-for-capacity {wait!r} is more than a week",
                    hint="give at most 168h, or never",
                )
        chosen = settings.spot_policy if policy is None else policy.strip().lower()
        if chosen not in SPOT_POLICIES:
            raise UsageError(
                f"--spot-policy {policy!r} is not a spot policy",
                hint=f"give one of {', '.join(SPOT_POLICIES)}",
            )
        return cls(wait_s, chosen)


def resource_flags(
    gpu_model: str | None,
    instance_type: str | None,
    region: str | None,
    zone: str | None,
    disk_gb: int | None,
) -> dict[str, Any]:
    flags = {
        "gpu_model": gpu_model,
        "instance_type": instance_type,
        "region": region,
        "zone": zone,
        "disk_gb": disk_gb,
    }
    return {key: value for key, value in flags.items() if value is not None}


def region_list(text: str) -> list[str]:
    """--regions a,b: the region names, or a one-line error for an empty list."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UsageError("--regions needs one region or more, e.g. us-east-1,us-west-2")
    return names
