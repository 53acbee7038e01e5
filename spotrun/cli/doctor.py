"""`spotrun doctor`: one line per check a first AWS launch needs, with what to do on failure."""

from __future__ import annotations

import json
import sys

import typer

from spotrun.core.config import load_settings
from spotrun.service.doctor import doctor as run_checks

MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}


def doctor(
    gpus: int = typer.Option(1, "--gpus", help="what the first launch will ask for"),
    instance_type: str | None = typer.Option(None, "--instance-type", help="e.g. g5.xlarge"),
    region: str | None = typer.Option(None, "--region", help="default: aws.region"),
    as_json: bool = typer.Option(False, "--json", help="a JSON list of the checks"),
) -> int:
    """Check, before anything is created, what a first AWS launch needs.

    Credentials and identity, the region, the image, the subnets, spot offers, the launch's
    permissions (EC2 DryRun), the vCPU quotas (spot and on-demand, per family on offer, in the
    region), the S3 bucket and the instance profile. Exits 1 when a check fails.

    \b
    Examples:
      spotrun doctor
      spotrun doctor --instance-type g5.xlarge --json
    """
    settings = load_settings()
    wanted: dict[str, object] = (
        {"instance_type": instance_type} if instance_type else {"gpus": gpus}
    )
    checks = run_checks(settings, wanted, region)
    if as_json:
        sys.stdout.write(json.dumps([c.as_dict() for c in checks], indent=2) + "\n")
    else:
        width = max(len(c.name) for c in checks)
        for check in checks:
            line = f"{MARKS[check.status]}  {check.name:<{width}}  {check.detail}"
            if check.fix and check.status in ("fail", "warn"):
                line += f"\n      {'':<{width}}  -> {check.fix}"
            for row in check.rows:
                line += f"\n      {'':<{width}}  {row}"
            sys.stdout.write(line + "\n")
    failed = [c for c in checks if c.status == "fail"]
    if not as_json:
        verdict = f"{len(failed)} check(s) failed" if failed else "ready for a first AWS launch"
        sys.stdout.write(verdict + "\n")
    return 1 if failed else 0
