"""The README's headline on AWS, in the lab: `spotrun launch resnet50-fast --gpus 8 --cloud aws
--dry-run` with no ImageNet on this machine shows the plan, then says how to put ImageNet in
S3 and launch with it; a real launch is refused with the same lines. Nothing is launched."""

from __future__ import annotations

from spotlab import Lab
from tests.conftest import Env

HEADLINE = ("launch", "resnet50-fast", "--gpus", "8", "--cloud", "aws")


def test_dry_run_shows_the_plan_and_how_to_get_imagenet_into_s3(aws_env: Env, lab: Lab) -> None:
    dry = aws_env.cli(*HEADLINE, "--dry-run")
    assert dry.returncode == 2, dry.stderr
    assert "dry run on aws:" in dry.stdout and "nothing was launched" in dry.stdout
    (said,) = [line for line in dry.stderr.splitlines() if line.startswith("error:")]
    assert "data set 'imagenet' is not in the data folder" in said
    assert "`spotrun data push ./imagenet s3://" in said and "/imagenet --max-side 256`" in said
    assert "then launch with `--set data=s3://" in said

    real = aws_env.cli(*HEADLINE, "-d")
    assert real.returncode == 2 and "dry run" not in real.stdout
    assert "spotrun data push ./imagenet s3://" in real.stderr
    assert aws_env.runs() == [] and lab.instances() == []
