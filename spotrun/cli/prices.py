"""`spotrun prices`: the spot offers a launch chooses from, beside on-demand prices."""

from __future__ import annotations

import typer

from spotrun.cli.launch import resource_flags
from spotrun.cli.library import api, load_settings
from spotrun.cli.render import Table, err, out, print_json
from spotrun.core.errors import UsageError
from spotrun.core.money import rate_digits


def prices(
    gpus: int | None = typer.Option(
        None, "--gpus", help="exactly this many GPUs (0: CPU types); default every GPU type"
    ),
    min_gpus: int | None = typer.Option(None, "--min-gpus", help="at least this many GPUs"),
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
      spotrun prices --gpus 1
      spotrun prices --min-gpus 4 --gpu-model A100
      spotrun prices --instance-type g5.xlarge --json
    """
    if gpus is not None and min_gpus is not None:
        raise UsageError(
            "--gpus (exactly) and --min-gpus (at least) each set the count; choose one"
        )
    for flag, count in (("--gpus", gpus), ("--min-gpus", min_gpus)):
        if count is not None and count < 0:
            raise UsageError(f"{flag} must be 0 or more, got {count}")
    least = gpus if gpus is not None else min_gpus if min_gpus is not None else 1
    settings = load_settings()
    priced = api.prices(
        settings,
        "aws",
        {"gpus": least, **resource_flags(gpu_model, instance_type, region, zone, None)},
    )
    offers = priced.offers
    if gpus is not None:  # like `sky show-gpus`: the count asked for, not every larger type
        offers = [o for o in offers if o.gpus == gpus]
        if not offers:
            raise UsageError(
                f"no offer has exactly {gpus} GPU(s)",
                hint=f"--min-gpus {gpus} lists types with {gpus} or more",
            )
    if as_json:
        print_json([{**o.to_dict(), "saving_pct": o.saving_pct} for o in offers])
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
            "-" if o.spot_usd_per_hour is None else rate_digits(o.spot_usd_per_hour),
            "-" if o.on_demand_usd_per_hour is None else rate_digits(o.on_demand_usd_per_hour),
            f"{o.saving_pct:.0f}%" if o.saving_pct is not None else "-",
        )
    out.print(table)
    out.print(f"spot: {priced.spot_source}; on-demand: {priced.on_demand_source}")
    if priced.offline:
        out.print(f"{priced.offline}; give AWS credentials for live prices", markup=False)
