"""The `spotrun` command: parse, call spotrun.service.runs, render. No cloud SDKs here."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from decimal import ROUND_HALF_UP, Decimal
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from spotrun.cli import remote as remote_cli
from spotrun.cli import resume as resume_cli
from spotrun.cli.common import HELP_OPTIONS, Cloud, print_error
from spotrun.cli.complete import complete_run, complete_sweep, completion, prepare_completion
from spotrun.cli.doctor import doctor as doctor_command
from spotrun.cli.follow_view import fmt_duration as _fmt_duration
from spotrun.cli.follow_view import fmt_metrics as _fmt_metrics
from spotrun.cli.lazy import lazy_module, stderr_console, stdout_console
from spotrun.cli.plot import plot as plot_command
from spotrun.cli.ssh import require_terminal
from spotrun.cli.ssh import ssh as ssh_command
from spotrun.cli.sweep import sweep_app
from spotrun.cli.typer_app import SpotrunTyper
from spotrun.core.errors import SpotrunError, UsageError
from spotrun.core.exitcodes import FAILURE, SUCCESS
from spotrun.core.terminal_text import printable

# `spotrun --help` and `spotrun ls` must answer fast: the library, rich and the run control
# are imported when a command first uses them (spotrun/cli/lazy.py), not here.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

    from spotrun.control import supervisor
    from spotrun.core.config import Settings
    from spotrun.service import runs as api
else:
    # reading runs (ls, status, logs, completion) needs only service.lookup
    _reads = {name: "spotrun.service.lookup" for name in ("open_ledger", "run_summary")}
    api = lazy_module("spotrun.service.runs", light=_reads)
    supervisor = lazy_module("spotrun.control.supervisor")

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]


def Table(**options: Any) -> RichTable:  # noqa: N802 - stands in for rich's class, imported late
    from rich.table import Table as RichTable

    return RichTable(**options)


def load_settings() -> Settings:
    from spotrun.core.config import load_settings as load

    return load()


app = SpotrunTyper(
    name="spotrun",
    no_args_is_help=True,
    # `spotrun completion SHELL` instead of typer's --install-completion: typer's root options
    # would cost every subcommand a pydantic import (their None defaults get coerced)
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,  # every subcommand inherits -h from here
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from spotrun import __version__

        sys.stdout.write(f"spotrun {__version__}\n")
        raise typer.Exit(SUCCESS)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print spotrun's version and exit.",
    ),
) -> None:
    """Train deep-learning models fast and cheaply on AWS spot GPUs.

    \b
    Examples:
      spotrun launch digits-fast          train a recipe on this machine
      spotrun ls                          live and recent runs
      spotrun logs -f RUN                 follow a run's output
      eval "$(spotrun completion bash)"   Tab completion (bash, zsh, fish)
    """


recipes_app = SpotrunTyper(help="List recipes, or show one in full.", rich_markup_mode=None)
app.add_typer(recipes_app, name="recipes")
app.add_typer(sweep_app, name="sweep")  # spotrun/cli/sweep.py
data_app = SpotrunTyper(
    help="Data sets in S3: push a folder as tar shards, list what was pushed.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(data_app, name="data")
app.command("completion")(completion)  # spotrun/cli/complete.py
app.command("doctor")(doctor_command)  # spotrun/cli/doctor.py
app.command("plot")(plot_command)  # spotrun/cli/plot.py
app.command("ssh")(ssh_command)  # spotrun/cli/ssh.py
app.command("resume")(resume_cli.resume)  # spotrun/cli/resume.py
app.command("rm")(resume_cli.rm)
app.add_typer(remote_cli.controller_app, name="controller")  # spotrun/cli/remote.py
app.command("pull")(remote_cli.pull)

out: Console = stdout_console()  # wide when piped: tables are not folded at 80 columns
err: Console = stderr_console()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# -------------------------------------------------------------------- launch
@app.command()
def launch(
    target: str | None = typer.Argument(
        None, metavar="[RECIPE|TASK.yaml]", help="a recipe name, or a task file (or use --cmd)"
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
    zone: str | None = typer.Option(None, "--zone", help="availability zone (aws)"),
    disk_gb: int | None = typer.Option(None, "--disk-gb", help="root volume size in GB (aws)"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="check the plan and the cloud's permissions; launch nothing"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="show only the run's stages"),
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
    settings = load_settings()
    own = OwnJobFlags(cmd, workdir, setup, env_, env_file)
    own.check(target, set_)
    ledger = api.open_ledger(settings)
    chosen_cloud = cloud.value if cloud else settings.default_cloud
    # The run's supervisor starts now and gets ready (imports, cloud clients) while we plan.
    warm = None if dry_run else supervisor.Prewarmed(settings, chosen_cloud)
    flags = _resource_flags(gpu_model, instance_type, region, zone, disk_gb)
    if nodes is not None:
        flags["nodes"] = nodes
    try:
        if own.wanted(target):
            prepared = own.prepare(
                settings,
                target,
                cloud=cloud.value if cloud else None,
                gpus=gpus,
                name=name,
                max_cost_usd=max_cost,
                max_hours=max_hours,
                resources=flags,
            )
        else:
            assert target is not None
            prepared = api.prepare_launch(
                settings,
                target,
                overrides=set_,
                cloud=chosen_cloud,
                gpus=gpus,
                name=name,
                max_cost_usd=max_cost,
                max_hours=max_hours,
                resources=flags,
                envs=own.job_env(),
            )
    except BaseException:
        if warm is not None:
            warm.cancel()
        raise
    if warm is not None and prepared.spec.cloud != chosen_cloud:  # a task file chose its cloud
        warm.cancel()
        warm = None
    if dry_run:
        passed = api.dry_run(settings, prepared)
        out.print(f"dry run on {prepared.spec.cloud}: {prepared.plan.reason}")
        out.print(f"permitted: {', '.join(passed)}; nothing was launched")
        return
    run = api.launch(ledger, prepared, prewarmed=warm)
    if detach:
        sys.stdout.write(run.id + "\n")
        err.print(
            f"launched {run.name} ({run.id}) on {run.cloud}: {prepared.plan.reason}\n"
            f"follow it with `spotrun logs -f {run.name}`, stop it with `spotrun stop {run.name}`"
        )
        return
    out.print(f"run {run.id}  {run.name}  on {run.cloud}")
    from spotrun.cli.follow_view import follow_run

    raise typer.Exit(follow_run(ledger, run.id, out, err, quiet=quiet))


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
        from spotrun.jobs.taskfile import is_task_file

        return self.cmd is not None or (target is not None and is_task_file(target))

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
        from spotrun.cli.common import job_environment

        return job_environment(self.envs, self.env_files)

    def prepare(
        self,
        settings: Any,
        target: str | None,
        *,
        cloud: str | None,
        gpus: int | None,
        name: str | None,
        max_cost_usd: float | None,
        max_hours: float | None,
        resources: dict[str, Any],
    ) -> api.LaunchPlan:
        from spotrun.jobs import own_command as ownjob
        from spotrun.jobs.taskfile import load_task

        envs = self.job_env()
        if gpus is not None:
            resources = {**resources, "gpus": gpus}
        limit = settings.workdir_max_mb
        if target is None:  # --cmd
            job = ownjob.build_job(
                self.cmd,
                workdir=self.workdir,
                setup=self.setup,
                envs=envs,
                workdir_max_mb=limit,
            )
            label = ownjob.DEFAULT_LABEL
        else:
            task = load_task(Path(target))
            updates = {k: v for k, v in (("workdir", self.workdir), ("setup", self.setup)) if v}
            task = task.model_copy(update=updates)
            job = ownjob.task_job(task, envs=envs, workdir_max_mb=limit)
            label = ownjob.task_label(task.name)
            name = name if name is not None else task.name  # the task's name is the run's
            resources = {**task.resources.as_flags(), **resources}
            max_cost_usd = max_cost_usd if max_cost_usd is not None else task.max_cost
            max_hours = max_hours if max_hours is not None else task.max_hours
        return api.prepare_job_launch(
            settings,
            job,
            label=label,
            cloud=cloud,  # type: ignore[arg-type]
            name=name,
            max_cost_usd=max_cost_usd,
            max_hours=max_hours,
            resources=resources,
        )


def _resource_flags(
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


# -------------------------------------------------------------------- prices
@app.command()
def prices(
    gpus: int = typer.Option(1, "--gpus", help="at least this many GPUs (0: CPU types)"),
    gpu_model: str | None = typer.Option(None, "--gpu-model", help="e.g. A10G, L4, A100"),
    instance_type: str | None = typer.Option(None, "--instance-type"),
    region: str | None = typer.Option(None, "--region"),
    zone: str | None = typer.Option(None, "--zone"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The spot offers a launch chooses from, cheapest first, beside on-demand prices (without
    AWS credentials: the GPU types of spotrun's shipped, dated catalog).

    \b
    Examples:
      spotrun prices
      spotrun prices --gpus 4 --gpu-model A100
      spotrun prices --instance-type g5.xlarge --json
    """
    if gpus < 0:
        raise UsageError(f"--gpus must be 0 or more, got {gpus}")
    settings = load_settings()
    priced = api.prices(
        settings,
        "aws",
        {"gpus": gpus, **_resource_flags(gpu_model, instance_type, region, zone, None)},
    )
    offers = priced.offers
    if as_json:
        _print_json([{**o.to_dict(), "saving_pct": o.saving_pct} for o in offers])
        if priced.offline:  # the list's shape stays the same; say where it came from aside
            err.print(f"note: {priced.offline}", markup=False)
        return
    table = Table(box=None, pad_edge=False)
    for col in ("TYPE", "ZONE", "GPUS", "GPU", "SPOT $/H", "ON-DEMAND $/H", "SAVING"):
        table.add_column(
            col, justify="right" if "$" in col or col in ("GPUS", "SAVING") else "left"
        )
    for o in offers:
        table.add_row(
            o.instance_type,
            o.zone,
            str(o.gpus),
            o.gpu_model or "-",
            f"{o.spot_usd_per_hour:.4f}" if o.spot_usd_per_hour is not None else "-",
            f"{o.on_demand_usd_per_hour:.4f}" if o.on_demand_usd_per_hour is not None else "-",
            f"{o.saving_pct:.0f}%" if o.saving_pct is not None else "-",
        )
    out.print(table)
    out.print(f"spot: {priced.spot_source}; on-demand: {priced.on_demand_source}")
    if priced.offline:
        out.print(f"{priced.offline}; give AWS credentials for live prices", markup=False)


# ------------------------------------------------------------------ ls/status
@app.command("ls")
def list_runs(
    all_: bool = typer.Option(
        False, "--all", "-a", help="every run, not only live and recent ones"
    ),
    as_json: bool = typer.Option(False, "--json", help="a JSON list of runs"),
) -> None:
    """List runs: live ones and the most recent finished ones.

    \b
    Examples:
      spotrun ls
      spotrun ls --all --json
    """
    ledger = api.open_ledger()
    runs = ledger.list_runs(include_all=all_)
    rows = [api.run_summary(ledger, r) for r in runs]
    if as_json:
        _print_json(rows)
        return
    if not rows:
        out.print("no runs yet; start one with `spotrun launch digits-fast`")
        return
    table = Table(box=None, pad_edge=False)
    for col in ("ID", "NAME", "RECIPE", "CLOUD", "STATE", "STARTED", "DURATION", "COST", "METRICS"):
        table.add_column(col, no_wrap=col in ("ID", "STATE"))
    for row in rows:
        table.add_row(
            row["id"],
            row["name"],
            row["recipe"],
            row["cloud"],
            row["state"],
            (row["started"] or row["created"] or "").replace("T", " ").rstrip("Z"),
            _fmt_duration(row["duration_s"]),
            _money(row["cost_usd"]) if row["cost_usd"] is not None else "?",
            printable(_fmt_metrics(row["metrics"])),  # the job wrote these
        )
    out.print(table)


@app.command()
def status(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one run: state history, instances, events, metrics, cost.

    \b
    Examples:
      spotrun status RUN
      spotrun status RUN --json
    """
    ledger = api.open_ledger()
    st = api.run_status(ledger, run)
    summary = api.run_summary(ledger, st.run)
    if as_json:
        _print_json(
            {
                **summary,
                "supervised": st.supervised,
                "run_dir": str(st.run.run_dir),
                "plan": st.run.plan.to_dict() if st.run.plan else None,
                "transitions": [
                    {
                        "from": t.from_state.value if t.from_state else None,
                        "to": t.to_state.value,
                        "at": t.at,
                        "reason": t.reason,
                    }
                    for t in st.transitions
                ],
                "instances": [i.__dict__ for i in st.instances],
                "events": [e.__dict__ for e in st.events],
                "cost_lines": [c.__dict__ for c in st.cost_lines],
            }
        )
        return
    r = st.run
    job = r.spec.job
    what = f"command {job.run!r}" if job is not None and job.run else f"recipe {r.recipe}"
    out.print(f"{r.name} ({r.id})  {what}  on {r.cloud}", markup=False)
    out.print(f"state     {r.state.value}" + (f"  ({printable(r.message)})" if r.message else ""))
    so_far = "" if r.is_terminal else " so far"
    shown = "? (no prices cached yet)" if st.cost_usd is None else _money(st.cost_usd) + so_far
    out.print(f"duration  {_fmt_duration(r.duration_s())}   cost {shown}")
    if r.last_metrics:
        out.print(f"metrics   {_fmt_metrics(r.last_metrics)}")
    if summary.get("staging"):
        out.print(f"staging   {summary['staging']['line']}")
    if summary.get("device"):
        out.print(f"device    {summary['device']['line']}", markup=False)
    out.print(f"run dir   {r.run_dir}")
    out.print("history:")
    for t in st.transitions:
        out.print(
            f"  {_fmt_duration(t.at - r.created_at):>7}  {t.to_state.value:<13} {t.reason or ''}"
        )
    if st.instances:
        out.print("instances:")
        for i in st.instances:
            out.print(
                f"  {i.id}  {i.instance_type}  {i.zone}  {i.market}  {i.state}  {i.address or ''}"
            )
    if st.events:
        out.print("events:")
        for e in st.events[-10:]:
            out.print(
                f"  {_fmt_duration(e.at - r.created_at):>7}  {e.kind}: {printable(e.message)}"
            )


@app.command()
def logs(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing until the run ends"),
    node: str | None = typer.Option(
        None, "--node", help="a multi-node run's node number, or 'all' (default: node 0)"
    ),
) -> None:
    """Print the job's output (what its tmux session shows).

    \b
    Examples:
      spotrun logs RUN
      spotrun logs -f RUN
      spotrun logs RUN --node all
    """
    ledger = api.open_ledger()
    try:
        for chunk in api.read_log(ledger, run, follow_log=follow, node=node):
            sys.stdout.write(chunk)
            sys.stdout.flush()
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command()
def attach(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    node: int = typer.Option(0, "--node", help="which node of a multi-node run"),
) -> None:
    """Put this terminal into the run's live tmux session (detach with Ctrl-b d).

    \b
    Examples:
      spotrun attach RUN
      spotrun attach RUN --node 1
    """
    ledger = api.open_ledger()
    argv = api.attach_command(ledger, run, node=node)
    require_terminal(run)  # tmux's own words would be "open terminal failed: not a terminal"
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # allow attaching from inside tmux
    os.execvpe(argv[0], argv, env)


@app.command("exec")
def exec_(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
    cmd: str = typer.Option(..., "--cmd", help="the command (bash), run in the job's folder"),
    detach: bool = typer.Option(False, "--detach", "-d", help="start it and return at once"),
) -> None:
    """Run another command on a live run's instance, in a new window of its tmux session.

    \b
    Examples:
      spotrun exec RUN --cmd "nvidia-smi"
      spotrun exec RUN --cmd "du -sh ." --detach
    """
    import time

    ledger = api.open_ledger()
    started = api.exec_command(ledger, run, cmd)
    err.print(f"{started.run.name}: running in tmux window {started.window}")
    if detach:
        return
    shown = 0
    while True:
        code, output = started.status()
        sys.stdout.write(output[shown:])
        sys.stdout.flush()
        shown = len(output)
        if code is not None:
            raise typer.Exit(code)
        time.sleep(0.2)


@app.command()
def stop(
    run: str = typer.Argument(
        ..., help="run name or a unique prefix of its id", autocompletion=complete_run
    ),
) -> None:
    """Stop a run: the job checkpoints, results are synced, instances terminated.

    \b
    Examples:
      spotrun stop RUN
    """
    ledger = api.open_ledger()
    target = ledger.resolve(run)
    err.print(f"stopping {target.name} ({target.id}) ...")
    final = api.stop(ledger, target.id)
    out.print(f"{final.name} {final.state.value}")


@app.command("gc")
def gc_command(
    yes: bool = typer.Option(False, "--yes", help="remove what is listed (default: only list)"),
) -> None:
    """List (and with --yes remove) spotrun-tagged AWS resources that no live run owns.

    \b
    Examples:
      spotrun gc
      spotrun gc --yes
    """
    ledger = api.open_ledger()
    report = api.gc(ledger, remove=yes)
    if not report.orphans:
        out.print("nothing of spotrun's is left without a live run")
        return
    for orphan in report.orphans:
        line = f"{orphan.kind:<15} {orphan.id:<24} {orphan.region:<12} run {orphan.run_id}"
        if orphan.detail:
            line += f"  ({orphan.detail})"
        if yes:
            why = report.removed.get(orphan)
            line += "  removed" if why is None else f"  NOT removed: {why}"
        out.print(line, highlight=False)
    if not yes:
        err.print(f"{len(report.orphans)} resource(s); run `spotrun gc --yes` to remove them")
    elif any(why is not None for why in report.removed.values()):
        raise typer.Exit(1)


class GroupBy(str, Enum):
    run = "run"
    day = "day"
    instance_type = "instance-type"


def _money(value: float | None) -> str:
    """USD to the cent, half up (as the cost table rounds), from a figure kept to 6 places."""
    if value is None:
        return "-"
    cents = Decimal(repr(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"${cents:,}"


@app.command()
def cost(
    run: str | None = typer.Argument(
        None, help="one run; default every run", autocompletion=complete_run
    ),
    sweep: str | None = typer.Option(
        None,
        "--sweep",
        help="only the runs of this sweep (name or id prefix)",
        autocompletion=complete_sweep,
    ),
    since: str | None = typer.Option(
        None, "--since", metavar="DATE", help="only runs created since (UTC date or date-time)"
    ),
    by: GroupBy = typer.Option(GroupBy.run, "--by", help="one row per run, UTC day or type"),
    as_json: bool = typer.Option(False, "--json", help="the rows as JSON"),
    as_csv: bool = typer.Option(False, "--csv", help="the rows as CSV"),
    plot: Path | None = typer.Option(
        None, "--plot", metavar="FILE.png", help="also draw cumulative cost over time per run"
    ),
) -> None:
    """What runs cost, as AWS bills it: instance-hours, spot and on-demand USD, saving.

    \b
    Examples:
      spotrun cost
      spotrun cost RUN
      spotrun cost --sweep SWEEP --by instance-type
      spotrun cost --since 2026-12-01 --csv
    """
    from spotrun.cost import reports
    from spotrun.cost.plot import check_plot_path

    if as_json and as_csv:
        raise UsageError("--json and --csv each print the rows; choose one")
    if plot is not None:
        check_plot_path(plot)
    ledger = api.open_ledger()
    report = api.cost_report(
        ledger,
        run,
        sweep=sweep,
        since=api.parse_since(since) if since is not None else None,
        by=by.value,
    )
    if plot is not None:
        api.write_cost_plot(report, plot)
        err.print(f"wrote {plot}")
    records = [reports.to_record(row, report.by) for row in report.rows]
    if as_json:
        _print_json(records)
    elif as_csv:
        _print_csv(records)
    else:
        _print_cost_table(report, records)
    for problem in report.errors:
        print_error(f"cannot price {problem}")
    if report.errors:
        raise typer.Exit(FAILURE)


def _print_csv(records: list[dict[str, Any]]) -> None:
    import csv

    if not records:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(records[0]), lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: ";".join(v) if isinstance(v, list) else v for k, v in record.items()})


def _print_cost_table(report: api.CostReport, records: list[dict[str, Any]]) -> None:
    from spotrun.cost import reports

    if not records:
        out.print("no runs to report")
        return
    by_run = report.by == "run"
    table = Table(box=None, pad_edge=False)
    head = {"run": "RUN", "day": "DAY (UTC)", "instance-type": "INSTANCE TYPE"}[report.by]
    columns = [head] + (["STATE"] if by_run else [])
    columns += ["INSTANCE-H", "SPOT", "EBS", "TOTAL", "ON-DEMAND", "SAVING"]
    if by_run:
        columns += ["TO TARGET", "COST TO TARGET"]
    for col in columns:
        table.add_column(col, justify="left" if col in (head, "STATE") else "right")
    rows: list[tuple[reports.Row, dict[str, Any]]] = list(zip(report.rows, records))
    if len(rows) > 1:
        rows.append((report.total, reports.to_record(report.total, report.by)))
    for row, rec in rows:
        if row.error:
            cells = [row.key, rec.get("state", ""), "?", "?", "?", "?", "?", "?", "", ""]
            table.add_row(*cells[: len(columns)])
            continue
        saving = rec["saving_pct"]
        cells = [row.key + ("*" if row.live else "")]
        if by_run:
            cells.append(rec.get("state") or "")
        cells += [
            f"{rec['instance_hours']:.2f}",
            _money(rec["spot_usd"]),
            _money(rec["storage_usd"]),
            _money(rec["cost_usd"]),
            _money(rec["on_demand_usd"]),
            "-" if saving is None else f"{saving:.1f}%",
        ]
        if by_run:
            cells += _target_cells(row)
        table.add_row(*cells)
    out.print(table)
    out.print("amounts in USD, rounded to the cent only here (totals are summed exactly)")
    for rec in records:
        if rec.get("staging_s") is not None:
            out.print(
                f"staging {rec['run']}: {rec['staging_s']:.1f} s of instance time while its data "
                f"was staged, {_money(rec['staging_usd'])} of its cost"
            )
    if any(row.live for row in report.rows):
        out.print("* still running: priced up to now")
    for method in report.methods:
        out.print(f"method: {method}")


def _target_cells(row: Any) -> list[str]:
    if row.run is None:
        return ["", ""]
    if row.target is not None:
        from spotrun.cost.rules import format_usd

        return [_fmt_duration(row.target.wall_s), format_usd(row.target.usd)]
    if row.target_wanted is not None:
        return ["not reached", "-"]
    return ["-", "-"]


# ------------------------------------------------------------------- recipes
@recipes_app.callback(invoke_without_command=True)
def recipes_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """The recipes you can launch, with what each was measured to reach.

    \b
    Examples:
      spotrun recipes
      spotrun recipes --json
    """
    if ctx.invoked_subcommand is not None:
        return
    items = api.recipes()
    if as_json:
        _print_json([r.summary() for r in items])
        return
    table = Table(box=None, pad_edge=False)
    for col in ("NAME", "DESCRIPTION", "RESULT"):
        table.add_column(col)
    for r in items:
        table.add_row(r.name, r.description, r.result)
    out.print(table)


@recipes_app.command("show")
def recipes_show(name: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """A recipe in full: hyperparameters, methods, resources, stated result.

    \b
    Examples:
      spotrun recipes show digits-fast
    """
    from spotrun.recipes import get_recipe
    from spotrun.recipes.describe import describe_recipe

    recipe = get_recipe(name, data_here=False)  # showing a recipe needs no data
    if as_json:
        _print_json(recipe.model_dump(mode="json"))
        return
    for line in describe_recipe(recipe):
        out.print(line, markup=False)


# ------------------------------------------------------------------- methods
@app.command()
def methods(as_json: bool = typer.Option(False, "--json")) -> None:
    """The speed-up methods a recipe can switch on (--set methods.NAME={}), in the order they
    apply, with their options and conflicts (spotrun/train/methods/README.md explains each).

    \b
    Examples:
      spotrun methods
      spotrun launch cifar10-fast --set methods.label_smoothing={}
    """
    from spotrun.train.methods.catalog import describe_catalog

    rows = describe_catalog()
    if as_json:
        _print_json(rows)
        return
    for row in rows:
        conflicts = f"  (not with {', '.join(row['conflicts'])})" if row["conflicts"] else ""
        out.print(f"{row['name']}: {row['summary']}{conflicts}", markup=False)
        for option in row["options"]:
            about = f"  {option['description']}" if option["description"] else ""
            out.print(
                f"    {option['name']} = {json.dumps(option['default'])}  "
                f"[{option['type']}]{about}",
                markup=False,
            )


# ---------------------------------------------------------------------- data
@data_app.command("push")
def data_push(
    folder: Path = typer.Argument(
        ..., help="an ImageFolder (train/ and val/ or test/), or a UTF-8 text file"
    ),
    dest: str = typer.Argument(..., help="s3://BUCKET/PREFIX"),
    shard_size: str = typer.Option("256MB", "--shard-size", help="bytes per tar shard"),
    parallel: int = typer.Option(8, "--parallel", help="shards packed and uploaded at once"),
    max_side: int | None = typer.Option(
        None,
        "--max-side",
        help="store the images training-ready: longer side at most N px, JPEG (resnet50-fast: 256)",
    ),
    quality: int = typer.Option(90, "--quality", help="JPEG quality of the resized images"),
    keep_original: bool = typer.Option(
        False, "--keep-original", help="with --max-side: the originals too, under PREFIX/original"
    ),
    tokenizer: str = typer.Option(
        "gpt2", "--tokenizer", help="a text file: tokenised here as gpt2 (GPT-2 BPE) or byte"
    ),
    val_fraction: float = typer.Option(
        0.1, "--val-fraction", help="a text file: the last fraction of characters held out"
    ),
) -> None:
    """Pack FOLDER into tar shards and a manifest, and upload them in parallel.

    A text file is tokenised once, here, and pushed as token files (uint16 ids) for the
    language-model recipes (gpt2-small-*): the instance then trains without tokenising.

    \b
    Examples:
      spotrun data push ./imagenet s3://my-bucket/imagenet --max-side 256
      spotrun data push ./cifar10 s3://my-bucket/cifar10 --shard-size 64MB
      spotrun data push ./openwebtext.txt s3://my-bucket/owt --tokenizer gpt2 --val-fraction 0.005
    """
    result = api.data_push(
        folder,
        dest,
        shard_size=shard_size,
        parallel=parallel,
        log=lambda line: out.print(line),
        max_side=max_side,
        quality=quality,
        keep_original=keep_original,
        tokenizer=tokenizer,
        val_fraction=val_fraction,
    )
    out.print(f"use it with: --set data={dest.rstrip('/')}  ({result.manifest.digest})")


@data_app.command("ls")
def data_ls(
    where: str | None = typer.Argument(None, help="s3://BUCKET[/PREFIX]; default aws.bucket"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List the data sets pushed at or under an S3 prefix.

    \b
    Examples:
      spotrun data ls
      spotrun data ls s3://my-bucket/
    """
    rows = api.data_list(where, load_settings())
    if as_json:
        _print_json(rows)
        return
    if not rows:
        out.print("no data sets there (push one: spotrun data push FOLDER s3://BUCKET/NAME)")
        return
    table = Table(box=None)
    for column in ("data set", "name", "shards", "files", "size", "pushed"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["uri"],
            row["name"],
            str(row["shards"]),
            f"{row['files']:,}",
            f"{row['bytes'] / 1e9:.2f} GB",
            _iso_minute(row["created_at"]),
        )
    out.print(table)


def _iso_minute(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# --------------------------------------------------------------------- train
@app.command()
def train(
    recipe: str = typer.Argument(..., help="recipe name"),
    run_dir: Path = typer.Option(..., "--run-dir", help="checkpoints, metrics.jsonl, recipe.json"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE"),
) -> None:
    """Train in the foreground (what runs inside a run's tmux session); resumes in RUN_DIR.

    Under torchrun (`torchrun --nproc-per-node N -m spotrun train ...`) each process is one
    rank of a DDP job; rank 0 writes the checkpoints and metrics.

    \b
    Examples:
      spotrun train digits-fast --run-dir /tmp/run
      spotrun train digits-fast --run-dir /tmp/run --set epochs=2
    """
    from spotrun.recipes import get_recipe
    from spotrun.train.build import exit_checkpointed, train_recipe

    resolved = get_recipe(recipe, set_)
    result = train_recipe(resolved, run_dir)
    if result.interrupted:
        if os.environ.get("RANK", "0") == "0":  # under torchrun, one line for the whole job
            print(
                f"checkpointed at step {result.step}; run the same command again to resume",
                flush=True,
            )
        exit_checkpointed()
    raise typer.Exit(SUCCESS)


# -------------------------------------------------------------------- sample
@app.command()
def sample(
    run: str = typer.Argument(
        ...,
        help="run name, a unique prefix of its id, or a run folder",
        autocompletion=complete_run,
    ),
    prompt: str = typer.Option("", "--prompt", help="text to continue (default: a new line)"),
    tokens: int = typer.Option(200, "--tokens", min=1, help="tokens to generate"),
    temperature: float = typer.Option(0.8, "--temperature", min=0.0),
    top_k: int | None = typer.Option(None, "--top-k", min=1, help="sample among the k likeliest"),
    seed: int = typer.Option(0, "--seed", help="the sampling seed"),
) -> None:
    """Text from a language-model run's newest checkpoint.

    \b
    Examples:
      spotrun sample RUN
      spotrun sample RUN --prompt "ROMEO:" --tokens 400
    """
    from spotrun.train.sample import sample_text  # torch: imported only when sampling

    folder = Path(run)
    run_dir = folder if folder.is_dir() else api.run_status(api.open_ledger(), run).run.run_dir
    text = sample_text(
        run_dir, prompt=prompt, tokens=tokens, temperature=temperature, top_k=top_k, seed=seed
    )
    print(text, flush=True)


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    code = _run(argv)
    if argv is None:
        # The program itself: everything it wrote is committed or flushed below, so it leaves
        # without the interpreter freeing every object of boto3 & co. one by one (seconds on a
        # loaded machine, after the answer is already on screen).
        for stream in (sys.stdout, sys.stderr):
            # a closed pipe (`spotrun ls | head`): nothing more to say to it
            with contextlib.suppress(OSError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    prepare_completion()
    try:
        # a controller on another host carries out the run commands (spotrun/cli/remote.py)
        forwarded = remote_cli.forward_if_remote(sys.argv[1:] if argv is None else argv, app)
        if forwarded is not None:
            return forwarded
        code = app(args=argv, prog_name="spotrun", standalone_mode=False)
    except click_exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `spotrun`: the help is the answer
            err.print(exc.format_message(), markup=False)
        else:
            print_error(exc.format_message())
        return 2
    except click_exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print_error(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        return 130
    except SpotrunError as exc:
        print_error(exc.user_message())
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return code if isinstance(code, int) else 0
