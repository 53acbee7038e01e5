"""The library surface of spotrun: what the CLI calls, and what scripts can call directly.

Every function takes the user's words (recipe names, run references) and returns typed
records; errors are SpotrunErrors with a message fit to show as is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spotrun.agent.session import session_exists, session_name, tmux_argv
from spotrun.agent.wrapper import LOG_FILE
from spotrun.cloud import get_provider
from spotrun.cloud.base import Offer, Provider
from spotrun.cloud.capabilities import AttachesOverSsh, ChecksLaunches, NamesItsPrices
from spotrun.control import budget_guard, supervisor
from spotrun.control.metrics import read_all
from spotrun.core.config import (
    CloudName,
    LaunchSpec,
    Resources,
    Settings,
    describe_validation_error,
)
from spotrun.core.errors import (
    CredentialsError,
    NotFoundError,
    SpotrunError,
    StateError,
    UsageError,
)
from spotrun.core.jobspec import JobSpec
from spotrun.core.runstates import RunState
from spotrun.core.waiting import WaitTimeout, wait_until
from spotrun.cost import reports
from spotrun.cost.bills import RunBill, bill_run, run_cost
from spotrun.cost.prices import PriceBook, PriceSource, SourceFactory
from spotrun.jobs import own_command as ownjob
from spotrun.launch.plan import Plan, make_plan
from spotrun.recipes import Recipe, Target, check_recipe, get_recipe, recipe_names
from spotrun.remote.job import JobDriver
from spotrun.service.follow import FollowFrom, Update, follow  # noqa: F401  (the library surface)
from spotrun.service.lookup import as_float as _as_float
from spotrun.service.lookup import open_ledger as open_ledger  # re-exported: the library surface
from spotrun.service.lookup import run_summary as run_summary
from spotrun.service.lookup import staging_summary as _staging_summary
from spotrun.store.ledger import CostLine, InstanceRecord, Ledger, RunEvent, RunRecord, Transition
from spotrun.store.sweeps import SweepStore
from spotrun.train.data.source import pin_data_paths


# -------------------------------------------------------------------- launch
@dataclass(frozen=True)
class LaunchPlan:
    spec: LaunchSpec
    recipe: Recipe | None  # None for your own command
    plan: Plan
    provider: Provider | None = None  # the provider that planned it (reused by a dry run)


def prepare_launch(
    settings: Settings,
    recipe_name: str,
    *,
    overrides: list[str] | None = None,
    cloud: CloudName | None = None,
    gpus: int | None = None,
    name: str | None = None,
    max_cost_usd: float | None = None,
    max_hours: float | None = None,
    resources: dict[str, Any] | None = None,
    envs: dict[str, str] | None = None,
) -> LaunchPlan:
    """Validate everything a launch needs and choose offers; nothing is created. `envs`: the
    trainer's environment (--env and the trackers' variables, spotrun.core.tracker_env)."""
    if gpus is not None and gpus < 0:  # 0: the run needs no GPU (as in a task file)
        raise UsageError(
            f"--gpus must be 0 or more, got {gpus}",
            hint="leave it out to use the recipe's own GPU count; 0 asks for no GPU",
        )
    check_nodes(settings, (resources or {}).get("nodes"))
    # The job runs in its run folder: a relative data path must mean what it meant here.
    overrides = pin_data_paths(overrides or [])
    recipe = get_recipe(recipe_name, overrides, data_here=False)
    check_multi_node(recipe, (resources or {}).get("nodes"), "it")
    check_recipe(recipe)  # its data, now that the rest is known to fit
    update: dict[str, Any] = dict(resources or {})
    if gpus is not None:
        update["gpus"] = gpus
    try:
        merged = Resources.model_validate({**recipe.resources.model_dump(), **update})
        spec = LaunchSpec(
            recipe=recipe.name,
            overrides=list(overrides or []),
            resources=merged,
            name=name,
            cloud=cloud or settings.default_cloud,
            max_cost_usd=max_cost_usd if max_cost_usd is not None else settings.max_cost_usd,
            max_hours=max_hours,
            env=dict(envs or {}),
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    if merged.nodes > 1 and not recipe.multi_node:  # the recipe's own resources ask more
        raise UsageError(f"recipe {recipe.name} declares itself single-node; drop --nodes")
    check_remote_data(recipe.data, spec.cloud, settings, merged.region)
    provider = get_provider(spec.cloud, settings)
    plan = make_plan(merged, provider.offers(merged))
    check_launchable(settings, provider, merged, plan.chosen, spec.max_cost_usd)
    return LaunchPlan(spec, recipe, plan, provider)


def check_multi_node(recipe: Recipe, nodes: object, what: str) -> None:
    """A recipe marked multi_node = false never runs on several nodes (`what` names who would)."""
    if isinstance(nodes, int) and nodes > 1 and not recipe.multi_node:
        raise UsageError(
            f"recipe {recipe.name} declares itself single-node (multi_node = false); "
            f"{what} cannot run on {nodes} nodes",
            hint="drop --nodes",
        )


def check_nodes(settings: Settings, nodes: object) -> None:
    """--nodes: a whole number from 1 to aws.max_nodes (a typo must not order a fleet)."""
    if nodes is None:
        return
    if not isinstance(nodes, int) or nodes < 1:
        raise UsageError(
            f"--nodes must be a whole number of at least 1, got {nodes}",
            hint="leave it out to run on one instance",
        )
    limit = settings.aws.max_nodes
    if nodes > limit:
        raise UsageError(
            f"--nodes {nodes} is more than the {limit} instances one run may have",
            hint="raise aws.max_nodes in config.toml if you mean it (and the account's "
            "vCPU quota allows it)",
        )


def prepare_job_launch(
    settings: Settings,
    job: JobSpec,
    *,
    label: str = "cmd",
    cloud: CloudName | None = None,
    name: str | None = None,
    max_cost_usd: float | None = None,
    max_hours: float | None = None,
    resources: dict[str, Any] | None = None,
) -> LaunchPlan:
    """Like prepare_launch, for your own command.

    spotrun.jobs.own_command builds and checks `job`.
    """
    check_nodes(settings, (resources or {}).get("nodes"))
    merged = ownjob.resources_for(dict(resources or {}))
    try:
        spec = LaunchSpec(
            recipe=label,
            resources=merged,
            name=name,
            cloud=cloud or settings.default_cloud,
            max_cost_usd=max_cost_usd if max_cost_usd is not None else settings.max_cost_usd,
            max_hours=max_hours,
            job=job,
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    if job.data is not None:
        check_job_data(job.data, spec.cloud, settings, merged.region)
    provider = get_provider(spec.cloud, settings)
    plan = make_plan(merged, provider.offers(merged))
    check_launchable(settings, provider, merged, plan.chosen, spec.max_cost_usd)
    return LaunchPlan(spec, None, plan, provider)


def check_launchable(
    settings: Settings,
    provider: Provider,
    wanted: Resources,
    offer: Offer,
    max_cost_usd: float | None,
) -> None:
    """The checks every launch (a run, your own command, a sweep's trial) passes once its
    offer is chosen and before anything exists: the cap affords it, the account's quota holds
    its nodes at once, and what the cloud will need (its image, its bucket, ...) is there."""
    if max_cost_usd is not None:
        budget_guard.check_affordable(
            max_cost_usd, offer, wanted.nodes, settings.budget_stop_margin_s
        )
    check_cluster_quota(provider, offer, wanted.nodes)
    if isinstance(provider, ChecksLaunches):
        provider.preflight(wanted)


def check_cluster_quota(provider: Provider, offer: Offer, nodes: int) -> None:
    """N nodes at once must fit the account's quota (clouds that can tell)."""
    if nodes > 1 and isinstance(provider, ChecksLaunches):
        provider.check_cluster_quota(offer, nodes)


def dry_run(settings: Settings, prepared: LaunchPlan) -> list[str]:
    """Ask the cloud whether a launch of `prepared` would be allowed; creates nothing.

    Returns the operations that passed. Only clouds with a permission check (AWS's DryRun) can.
    """
    provider = prepared.provider or get_provider(prepared.spec.cloud, settings)
    if not isinstance(provider, ChecksLaunches):
        raise UsageError(f"--dry-run needs a cloud that can check permissions; not {provider.name}")
    return list(provider.dry_run(prepared.plan.chosen))


@dataclass(frozen=True)
class PriceTable:
    offers: list[Offer]  # cheapest first
    on_demand_source: str  # where the on-demand column came from
    spot_source: str = "EC2's current prices"
    offline: str | None = None  # why the prices are the shipped catalog's, not the cloud's


def prices(
    settings: Settings, cloud: CloudName = "aws", resources: dict[str, Any] | None = None
) -> PriceTable:
    """The offers a launch with these resources would choose from, cheapest first; without
    credentials, the GPU types of spotrun's shipped, dated catalog instead (and it says so)."""
    try:
        wanted = Resources.model_validate(resources or {})
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc
    try:  # a profile that does not exist fails as the provider is made
        provider = get_provider(cloud, settings)
        offers = make_plan(wanted, provider.offers(wanted), limit=None).offers
    except CredentialsError as exc:
        return catalog_prices(settings, wanted, why=exc.message)
    source = provider.on_demand_source if isinstance(provider, NamesItsPrices) else "the cloud"
    return PriceTable(offers, source)


def catalog_prices(settings: Settings, wanted: Resources, *, why: str) -> PriceTable:
    """The shipped catalog's GPU offers that fit `wanted`: known spot prices first, cheapest
    first, then the types it has only on-demand prices for."""
    from spotrun.cloud.gpu_catalog import shipped_catalog
    from spotrun.cloud.pricing_table import shipped_table

    if not wanted.gpus:
        raise UsageError(
            f"{why}, and spotrun's shipped catalog lists GPU types only",
            hint="ask for GPUs (--gpus 1), or give AWS credentials to see CPU types",
        )
    catalog = shipped_catalog()
    if wanted.region and wanted.region != catalog.region:
        raise UsageError(
            f"{why}, and spotrun's shipped catalog holds {catalog.region} prices only",
            hint=f"drop --region to see {catalog.region}, or give AWS credentials",
        )
    # make_plan keeps what fits, or says why nothing does
    fitting = make_plan(wanted, catalog.matching(settings.aws.gpu_instance_types), limit=None)
    offers = sorted(
        fitting.offers,
        key=lambda o: (
            o.spot_usd_per_hour is None,
            o.spot_usd_per_hour or o.on_demand_usd_per_hour or float("inf"),
            o.gpus,
            o.instance_type,
        ),
    )
    return PriceTable(
        offers,
        on_demand_source=shipped_table().label,
        spot_source=f"typical prices from {catalog.label}",
        offline=f"{why}: these are spotrun's shipped prices, not live ones",
    )


def launch(
    ledger: Ledger, prepared: LaunchPlan, *, prewarmed: supervisor.Prewarmed | None = None
) -> RunRecord:
    """Record the run and hand it to a new supervisor (or to `prewarmed`); returns at once."""
    run = ledger.create_run(prepared.spec, plan=prepared.plan)
    ledger.add_event(run.id, "plan", prepared.plan.reason)
    lacking = ledger.settings.aws.without_credentials() if run.spec.cloud == "aws" else None
    if lacking:
        ledger.add_event(run.id, "plan", lacking)
    pid = prewarmed.hand(run) if prewarmed else supervisor.spawn(ledger.settings, run)
    ledger.set_supervisor(run.id, pid)
    return ledger.get_run(run.id)


# -------------------------------------------------------------------- status
@dataclass(frozen=True)
class RunStatus:
    run: RunRecord
    transitions: list[Transition]
    instances: list[InstanceRecord]
    events: list[RunEvent]
    cost_lines: list[CostLine]
    cost_usd: float | None  # so far, for a live run; None when it cannot be priced yet
    supervised: bool


def run_status(ledger: Ledger, ref: str) -> RunStatus:
    run = ledger.resolve(ref)
    return RunStatus(
        run=run,
        transitions=ledger.transitions(run.id),
        instances=ledger.instances(run.id),
        events=ledger.events(run.id),
        cost_lines=ledger.cost_lines(run.id),
        cost_usd=_as_float(run_cost(ledger, run)),
        supervised=supervisor.is_supervised(run),
    )


# ---------------------------------------------------------------------- logs
def log_path(run: RunRecord) -> Path:
    return run.run_dir / LOG_FILE


def node_log_paths(run: RunRecord, node: str | None) -> list[tuple[str, Path]]:
    """The job logs `logs --node` reads: node 0's (the default), node K's, or every node's,
    each with the label its lines get ("" for one log)."""
    if node is None:
        return [("", log_path(run))]
    from spotrun.control import cluster

    ids = cluster.read_layout(run.run_dir) or [""]
    paths = [cluster.local_dir(run.run_dir, i) / LOG_FILE if i else log_path(run) for i in ids]
    if node == "all":
        return [(f"[node {k}] ", path) for k, path in enumerate(paths)]
    if not node.isdigit() or int(node) >= len(paths):
        raise UsageError(
            f"--node {node}: run {run.name} has nodes 0 to {len(paths) - 1}",
            hint="give a node number, or --node all",
        )
    return [("", paths[int(node)])]


def read_log(
    ledger: Ledger,
    ref: str,
    *,
    follow_log: bool = False,
    poll_s: float = 0.25,
    node: str | None = None,
) -> Iterator[str]:
    """The job's output; with follow_log, keeps yielding new output until the run ends.

    `node`: a multi-node run's node number, or "all" (every node's lines, labelled)."""
    run = ledger.resolve(ref)
    offsets: dict[Path, int] = {}
    partial: dict[Path, str] = {}
    while True:
        fresh = False
        for label, path in node_log_paths(run, node):  # again each time: nodes get replaced
            try:
                with open(path, "rb") as fh:
                    fh.seek(offsets.get(path, 0))
                    data = fh.read()
            except FileNotFoundError:
                data = b""
            if not data:
                continue
            fresh = True
            offsets[path] = offsets.get(path, 0) + len(data)
            text = data.decode(errors="replace")
            if not label:
                yield text
                continue
            text = partial.pop(path, "") + text  # whole lines only, each with its node
            lines = text.split("\n")
            if lines[-1]:
                partial[path] = lines[-1]
            yield "".join(f"{label}{line}\n" for line in lines[:-1])
        if not follow_log:
            return
        run = ledger.get_run(run.id)
        if run.is_terminal and not fresh:
            return
        time.sleep(poll_s)


# -------------------------------------------------------------------- attach
def attach_command(ledger: Ledger, ref: str, node: int = 0) -> list[str]:
    """argv that puts this terminal into the run's tmux session (on node `node`)."""
    run = ledger.resolve(ref)
    nodes = run.spec.resources.nodes
    if not 0 <= node < nodes:
        raise UsageError(f"--node {node}: run {run.name} has nodes 0 to {nodes - 1}")
    if run.is_terminal:
        raise StateError(
            f"run {run.name} has ended ({run.state.value}); its tmux session is gone",
            hint=f"read its output with `spotrun logs {run.name}`",
        )
    if run.state is not RunState.RUNNING:
        raise StateError(
            f"run {run.name} is {run.state.value}; its job has not started yet",
            hint="try again in a moment, or follow it with `spotrun logs -f`",
        )
    from spotrun.sweep.packs import run_provider

    provider = run_provider(ledger, run)  # a packed sweep trial attaches through its pack
    if isinstance(provider, AttachesOverSsh):
        return list(provider.attach_command(run.id, node=node if nodes > 1 else None))
    session = session_name(run.id)
    if not session_exists(session):
        raise StateError(f"run {run.name}'s tmux session {session} is gone")
    return [*tmux_argv(), "attach-session", "-t", f"={session}"]


# ---------------------------------------------------------------------- exec
@dataclass(frozen=True)
class ExecWindow:
    """A command `exec` started in a new window of a live run's tmux session."""

    run: RunRecord
    window: str
    driver: JobDriver

    def status(self) -> tuple[int | None, str]:
        """Its exit code (None while it runs) and its output so far."""
        return self.driver.exec_status(self.window)


def exec_command(ledger: Ledger, ref: str, command: str) -> ExecWindow:
    """Run `command` beside a live run's job, in a new window of its tmux session."""
    if not command.strip():
        raise UsageError("the command is empty: nothing to run", hint='e.g. --cmd "nvidia-smi"')
    run = ledger.resolve(ref)
    if run.state is not RunState.RUNNING:
        raise StateError(
            f"run {run.name} is {run.state.value}; exec needs a running job",
            hint="`spotrun ls` shows which runs are running",
        )
    provider = get_provider(run.cloud, ledger.settings)
    live = [i for i in provider.describe(run.id) if i.is_live]
    if not live:
        raise StateError(f"run {run.name} has no live instance")
    head = live[0]
    driver = JobDriver(
        provider.runner(head),
        provider.spotrun_command(head),
        provider.run_dir(head, run.id),
        session_name(run.id),
    )
    return ExecWindow(run, driver.exec(command), driver)


# ---------------------------------------------------------------------- stop
def stop(ledger: Ledger, ref: str, *, timeout_s: float = 120.0) -> RunRecord:
    """Stop a run: checkpoint, sync, terminate, state stopped. Waits until it is done."""
    from spotrun.control.controller import RunController

    run = ledger.resolve(ref)
    if run.is_terminal:
        raise StateError(f"run {run.name} has already ended ({run.state.value})")
    ledger.request_stop(run.id)
    if supervisor.is_supervised(run):
        try:
            return wait_until(
                lambda: _ended(ledger, run.id), timeout_s=timeout_s, what=f"run {run.name} to stop"
            )
        except WaitTimeout:
            ledger.add_event(
                run.id,
                "stop",
                f"supervisor did not stop the run in {timeout_s:.0f} s; stopping it here",
            )
    return RunController(ledger, run.id).drive()


def _ended(ledger: Ledger, run_id: str) -> RunRecord | None:
    run = ledger.get_run(run_id)
    return run if run.is_terminal else None


# ------------------------------------------------------------------------ gc
@dataclass(frozen=True)
class GcReport:
    orphans: list[Any]  # spotrun.cloud.aws.gc.Orphan, in removal order
    removed: dict[Any, str | None]  # orphan -> None when removed, else why not; {} = listed


def gc(ledger: Ledger, *, remove: bool = False) -> GcReport:
    """What spotrun made on AWS that no live run owns (every configured region); with
    `remove`, remove it too."""
    from spotrun.cloud.aws import gc as aws_gc

    live = {run.id for run in ledger.active_runs()}
    orphans = aws_gc.find_orphans(ledger.settings, live)
    removed = aws_gc.remove(ledger.settings, orphans) if remove and orphans else {}
    return GcReport(orphans, removed)


# ---------------------------------------------------------------------- cost
GROUPINGS: tuple[reports.GroupBy, ...] = ("run", "day", "instance-type")


@dataclass(frozen=True)
class CostReport:
    by: reports.GroupBy
    rows: list[reports.Row]
    total: reports.Row
    methods: list[str]  # how the amounts were computed, to state once under the table
    bills: list[RunBill]  # the priced runs, for the plot
    now: float

    @property
    def errors(self) -> list[str]:
        return [f"{r.key}: {r.error}" for r in self.rows if r.error]


def provider_prices(settings: Settings) -> SourceFactory:
    """The price source of each cloud provider that has one (AWS); built on first need."""

    def source(name: str) -> PriceSource | None:
        provider = get_provider(name, settings)
        return provider if isinstance(provider, PriceSource) else None

    return source


def parse_since(text: str) -> float:
    """A --since value: a UTC date (2025-06-01) or date and time (2025-06-01T12:00)."""
    raw = text.strip()
    try:
        when = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)
    except ValueError:
        raise UsageError(
            f"--since '{text}' is not a date", hint="give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def cost_report(
    ledger: Ledger,
    ref: str | None = None,
    *,
    sweep: str | None = None,
    since: float | None = None,
    by: str = "run",
    now: float | None = None,
    sources: SourceFactory | None = None,
) -> CostReport:
    """Cost of one run, a sweep's runs, or every run (created since `since`), grouped `by`.

    Runs are priced again from the ledger's instances and cached prices; price history missing
    from the cache is fetched through `sources` (default: the cloud providers). A run that
    cannot be priced gets a row with its error instead of amounts."""
    if by not in GROUPINGS:
        raise UsageError(f"--by must be one of {', '.join(GROUPINGS)}, got '{by}'")
    if ref is not None and (sweep is not None or since is not None):
        raise UsageError("name one run, or select runs with --sweep/--since, not both")
    now = now if now is not None else time.time()
    if ref is not None:
        runs = [ledger.resolve(ref)]
    else:
        sweep_id = None if sweep is None else _sweep_id(ledger, sweep)
        runs = ledger.list_runs(include_all=True, sweep_id=sweep_id, since=since)
        if sweep is not None and not runs:
            raise NotFoundError(f"no run belongs to sweep '{sweep}'")
    book = PriceBook(ledger, sources if sources is not None else provider_prices(ledger.settings))
    priced = [_priced_run(ledger, run, book, now) for run in runs]
    grouping = by  # narrowed to a GroupBy by the check above
    rows = reports.group(priced, grouping, now)
    bills = [p.bill for p in priced if p.bill is not None]
    methods = sorted({m for b in bills for m in b.methods})
    if grouping == "run" and any(r.target_wanted is not None for r in rows):
        methods.append(reports.TARGET_METHOD)
    return CostReport(grouping, rows, reports.total(rows), methods, bills, now)


def _sweep_id(ledger: Ledger, ref: str) -> str:
    """A sweep's id from its name, id or id prefix, as every sweep command takes it; a ref the
    sweeps table does not know is taken as the id its runs carry."""
    store = SweepStore(ledger)
    try:
        return store.resolve(ref).id
    except NotFoundError:
        if any(s.id.startswith(ref) for s in store.all()):
            raise  # a prefix of several sweep ids
        return ref


def _priced_run(ledger: Ledger, run: RunRecord, book: PriceBook, now: float) -> reports.PricedRun:
    try:
        bill = bill_run(ledger, run, book, now=now)
    except SpotrunError as exc:  # no history, or the cloud refused the price request
        return reports.PricedRun(run, None, error=exc.user_message())
    if run.is_terminal:
        _store_if_changed(ledger, bill)
    target = _target_of(run)
    staged = _staging_summary(run)
    return reports.PricedRun(
        run,
        bill,
        transitions=ledger.transitions(run.id),
        metrics=read_all(run.run_dir / "metrics.jsonl") if target else [],
        target=target,
        staging_spans=staged.spans if staged else (),
    )


def _store_if_changed(ledger: Ledger, bill: RunBill) -> None:
    """A finished run's lines, written again when a recomputation differs (e.g. prices that
    could not be fetched at teardown)."""
    lines = bill.cost_lines()
    stored = ledger.cost_lines(bill.run.id)
    if [(s.kind, s.amount) for s in stored] != [(n.kind, n.amount) for n in lines]:
        ledger.replace_cost_lines(bill.run.id, lines)


def _target_of(run: RunRecord) -> Target | None:
    if run.spec.job is not None:
        return None  # your own command: no recipe, no target
    try:
        return get_recipe(run.spec.recipe, run.spec.overrides).target
    except SpotrunError:
        return None  # a recipe since removed or changed: no target to measure against


def cost_rows(ledger: Ledger, ref: str | None = None, **options: Any) -> list[dict[str, Any]]:
    """The report's rows as plain dicts (what `spotrun cost --json` prints)."""
    report = cost_report(ledger, ref, **options)
    return [reports.to_record(row, report.by) for row in report.rows]


def write_cost_plot(report: CostReport, path: Path) -> None:
    from spotrun.cost.plot import write_plot

    write_plot(path, report.bills)


# ------------------------------------------------------------------- recipes
def recipes() -> list[Recipe]:
    # listing and showing recipes must work on a machine without their data
    return [get_recipe(name, data_here=False) for name in recipe_names()]


# ---------------------------------------------------------------------- data
def check_remote_data(
    data: str, cloud: CloudName, settings: Settings, region: str | None = None
) -> None:
    """Refuse, before anything exists, remote data (s3://, snapshot:) that cannot be staged."""
    from spotrun.datasets.spec import S3Data, SnapshotData, is_remote, parse_data

    if not is_remote(data):
        return
    spec = parse_data(data)
    if isinstance(spec, S3Data):
        from spotrun.service.datasets import check_s3_data

        check_s3_data(data)
    elif isinstance(spec, SnapshotData):
        if cloud != "aws":
            raise UsageError(
                f"data {spec.uri} is an EBS snapshot: only --cloud aws can attach it",
                hint="launch with --cloud aws, or copy the data set here and give its path",
            )
        from spotrun.cloud.aws.volumes import check_snapshot

        check_snapshot(spec.snapshot_id, region or settings.aws.region, settings.aws)


def check_job_data(
    data: str, cloud: CloudName, settings: Settings, region: str | None = None
) -> None:
    """A task's `data`, refused before anything exists: remote data as for a recipe; a local
    path must exist, and only the local cloud sees this machine's files."""
    from spotrun.datasets.spec import is_remote

    if is_remote(data):
        check_remote_data(data, cloud, settings, region)
        return
    if not Path(data).exists():
        raise UsageError(
            f"data {data} does not exist",
            hint="give an existing folder, an s3://BUCKET/PREFIX or a snapshot:snap-... id",
        )
    if cloud != "local":
        raise UsageError(
            f"data {data} is a path on this machine: the {cloud} cloud's instances cannot see it",
            hint=f"push it first (spotrun data push {data} s3://BUCKET/PREFIX) and give that",
        )


def data_push(
    folder: Path,
    dest: str,
    *,
    shard_size: str = "256MB",
    parallel: int = 8,
    log: Any = print,
    max_side: int | None = None,
    quality: int = 90,
    keep_original: bool = False,
    tokenizer: str = "gpt2",
    val_fraction: float = 0.1,
) -> Any:
    """Pack an ImageFolder into tar shards plus a manifest under an s3:// prefix (its images
    training-ready, longer side at most `max_side`, when that is given); a text file is
    tokenised (`tokenizer`) and pushed as token files."""
    from spotrun.datasets.manifest import stored_images
    from spotrun.datasets.pack import parse_size
    from spotrun.service.datasets import push_folder, push_text_file

    size = parse_size(shard_size)
    if parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {parallel}")
    if folder.is_file():
        if max_side is not None or keep_original:
            raise UsageError(
                f"{folder} is a text file: --max-side and --keep-original are for images",
                hint="leave them out for a text",
            )
        return push_text_file(
            folder,
            dest,
            tokenizer=tokenizer,
            val_fraction=val_fraction,
            shard_size=size,
            parallel=parallel,
            log=log,
        )
    images = stored_images(max_side, quality) if max_side is not None else None
    return push_folder(
        folder,
        dest,
        shard_size=size,
        parallel=parallel,
        log=log,
        images=images,
        keep_original=keep_original,
    )


def data_list(where: str | None, settings: Settings) -> list[dict[str, Any]]:
    """The data sets pushed at or under `where` (default: the configured aws.bucket)."""
    from spotrun.service.datasets import list_sets

    if where is None:
        if not settings.aws.bucket:
            raise UsageError(
                "which bucket? give s3://BUCKET[/PREFIX]", hint="or set aws.bucket in config.toml"
            )
        where = f"s3://{settings.aws.bucket}"
    return [row.to_dict() for row in list_sets(where)]
