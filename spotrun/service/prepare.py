"""Preparing a launch: everything a run, your own command or a sweep's trial needs checked, and
its offers chosen, before anything exists (nothing is created here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from spotrun.cloud import get_provider
from spotrun.cloud.base import Offer, Provider
from spotrun.cloud.by_name import check_snapshot, s3_data_site, s3_store
from spotrun.cloud.capabilities import ChecksLaunches
from spotrun.cloud.plan import Plan, plan_launch, with_on_demand
from spotrun.cloud.ranking import DataSite, expected_hours
from spotrun.control import budget_guard
from spotrun.core.config import (
    CloudName,
    LaunchSpec,
    Resources,
    Settings,
    describe_validation_error,
)
from spotrun.core.errors import UsageError
from spotrun.core.jobspec import JobSpec
from spotrun.core.launch_request import LaunchRequest
from spotrun.datasets.manifest import MANIFEST_NAME, read_manifest
from spotrun.datasets.spec import S3Data, SnapshotData, is_remote, parse_data, parse_s3
from spotrun.recipes import Recipe, check_recipe, get_recipe
from spotrun.recipes.batching import global_batch_line
from spotrun.service.data_advice import DataAdvice, aws_data_advice
from spotrun.service.pool_history import recorded_history
from spotrun.train.data.source import pin_data_paths


@dataclass(frozen=True)
class LaunchPlan:
    spec: LaunchSpec
    recipe: Recipe | None  # None for your own command
    plan: Plan
    provider: Provider | None = None  # the provider that planned it (reused by a dry run)
    batch_line: str | None = None  # how the recipe's global batch is made on the run's GPUs
    data_advice: DataAdvice | None = None  # a dry run's data set missing here: how to get it to S3


def prepare_launch(
    settings: Settings,
    recipe_name: str,
    request: LaunchRequest | None = None,
    *,
    overrides: list[str] | None = None,
    envs: dict[str, str] | None = None,
    dry_run: bool = False,
) -> LaunchPlan:
    """Validate everything a launch needs and choose offers; nothing is created. `envs`: the
    trainer's environment (--env and the trackers' variables, spotrun.service.tracker_env)."""
    request = request or LaunchRequest()
    check_nodes(settings, request.nodes)
    # The job runs in its run folder: a relative data path must mean what it meant here.
    overrides = pin_data_paths(overrides or [])
    recipe = get_recipe(recipe_name, overrides, data_here=False)
    check_multi_node(recipe, request.nodes, "it")
    # its data, now that the rest is known to fit; on AWS a dry run still shows the plan
    data_advice = aws_data_advice(recipe.data, request.cloud or settings.default_cloud, settings)
    if data_advice is None:
        check_recipe(recipe)
    elif not dry_run:
        raise data_advice.error()
    merged = request.resources_over(recipe.resources)
    spec = launch_spec(settings, request, recipe.name, merged, overrides=overrides, env=envs)
    if merged.nodes > 1 and not recipe.multi_node:  # the recipe's own resources ask more
        raise UsageError(f"recipe {recipe.name} declares itself single-node; drop --nodes")
    check_remote_data(recipe.data, spec.cloud, settings, merged.region)
    provider = get_provider(spec.cloud, settings)
    # recipes state no time to finish yet: the transfer is spread over --max-hours, else 1 h
    hours = expected_hours(None, spec.max_hours)
    site = data_site_of(recipe.data, spec.cloud)
    plan = plan_launch(provider, merged, recorded_history(settings), site, hours)
    check_launchable(settings, provider, merged, plan.chosen, spec.max_cost_usd)
    # GPUs that cannot split the global batch: refused before anything exists (after the
    # plan, so that a quota the cluster cannot fit is what a user hears first)
    batch_line = global_batch_line(recipe, merged.gpus, merged.nodes)
    return LaunchPlan(
        spec, recipe, with_capacity_terms(spec, plan), provider, batch_line, data_advice
    )


def launch_spec(
    settings: Settings,
    request: LaunchRequest,
    label: str,
    resources: Resources,
    *,
    overrides: list[str] | None = None,
    env: dict[str, str] | None = None,
    job: JobSpec | None = None,
) -> LaunchSpec:
    """The spec stored with the run: the request, the settings' defaults where it is silent."""
    try:
        return LaunchSpec(
            recipe=label,
            overrides=list(overrides or []),
            resources=resources,
            name=request.name,
            cloud=request.cloud or settings.default_cloud,
            max_cost_usd=(
                request.max_cost_usd if request.max_cost_usd is not None else settings.max_cost_usd
            ),
            max_hours=request.max_hours,
            wait_for_capacity_s=request.wait_for_capacity_s,
            spot_policy=request.spot_policy or "spot",
            job=job,
            env=dict(env or {}),
        )
    except ValidationError as exc:
        raise UsageError(describe_validation_error(exc)) from exc


def with_capacity_terms(spec: LaunchSpec, plan: Plan) -> Plan:
    """--spot-policy auto: on-demand offers after the spot ones, taken when spot cannot be had
    within the wait."""
    return with_on_demand(plan) if spec.spot_policy == "auto" else plan


def check_multi_node(recipe: Recipe, nodes: int | None, what: str) -> None:
    """A recipe marked multi_node = false never runs on several nodes (`what` names who would)."""
    if nodes is not None and nodes > 1 and not recipe.multi_node:
        raise UsageError(
            f"recipe {recipe.name} declares itself single-node (multi_node = false); "
            f"{what} cannot run on {nodes} nodes",
            hint="drop --nodes",
        )


def check_nodes(settings: Settings, nodes: int | None) -> None:
    """--nodes: at most run.max_nodes (a typo must not order a fleet; LaunchRequest holds it
    to 1 or more)."""
    if nodes is None:
        return
    limit = settings.run.max_nodes
    if nodes > limit:
        raise UsageError(
            f"--nodes {nodes} is more than the {limit} instances one run may have",
            hint="raise run.max_nodes in config.toml if you mean it (and the account's "
            "vCPU quota allows it)",
        )


def prepare_job_launch(
    settings: Settings,
    job: JobSpec,
    request: LaunchRequest | None = None,
    *,
    label: str = "cmd",
) -> LaunchPlan:
    """Like prepare_launch, for your own command.

    spotrun.jobs.own_command builds and checks `job`.
    """
    request = request or LaunchRequest()
    check_nodes(settings, request.nodes)
    merged = request.resources_over(Resources())
    spec = launch_spec(settings, request, label, merged, job=job)
    if job.data is not None:
        check_job_data(job.data, spec.cloud, settings, merged.region)
    provider = get_provider(spec.cloud, settings)
    hours = expected_hours(None, spec.max_hours)
    site = data_site_of(job.data, spec.cloud)
    plan = plan_launch(provider, merged, recorded_history(settings), site, hours)
    check_launchable(settings, provider, merged, plan.chosen, spec.max_cost_usd)
    return LaunchPlan(spec, None, with_capacity_terms(spec, plan), provider)


def data_site_of(data: str | None, cloud: CloudName) -> DataSite | None:
    """Where an s3:// data set lives and its size, for the plan to weigh its transfer to
    offers in other regions (AWS's offers: the only ones with regions)."""
    if (
        cloud != "aws"
        or not data
        or not is_remote(data)
        or not isinstance(parse_data(data), S3Data)
    ):
        return None
    return s3_data_site(data)


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


def check_remote_data(
    data: str, cloud: CloudName, settings: Settings, region: str | None = None
) -> None:
    """Refuse, before anything exists, remote data (s3://, snapshot:) that cannot be staged."""
    if not is_remote(data):
        return
    spec = parse_data(data)
    if isinstance(spec, S3Data):
        check_s3_data(data)
    elif isinstance(spec, SnapshotData):
        if cloud != "aws":
            raise UsageError(
                f"data {spec.uri} is an EBS snapshot: only --cloud aws can attach it",
                hint="launch with --cloud aws, or copy the data set here and give its path",
            )
        check_snapshot(spec.snapshot_id, region, settings)


def check_job_data(
    data: str, cloud: CloudName, settings: Settings, region: str | None = None
) -> None:
    """A task's `data`, refused before anything exists: remote data as for a recipe; a local
    path must exist, and only the local cloud sees this machine's files."""
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


def check_s3_data(text: str) -> str:
    """At launch: the S3 data set exists and is readable; what it is, in words."""
    source = parse_s3(text)
    store = s3_store(source.bucket)
    store.check_bucket()
    raw = store.read(source.key(MANIFEST_NAME))
    if raw is not None:
        manifest = read_manifest(raw, f"{source.uri}/{MANIFEST_NAME}")
        return f"{len(manifest.shards)} shards, {manifest.size:,} bytes, {manifest.files:,} files"
    for _ in store.list(source.list_prefix):
        return "a folder tree (no manifest: staged file by file)"
    raise UsageError(
        f"data {source.uri}: nothing is stored under that prefix",
        hint=f"push the data set first: spotrun data push FOLDER {source.uri}",
    )
