"""What a launch on AWS is told when its recipe names a data set this machine lacks.

Apart from spotrun.service.datasets (the data commands: the packer, downloads, PIL) so that a
launch, which asks this of every recipe, loads none of those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spotrun.cloud.by_name import data_bucket
from spotrun.core.config import Settings
from spotrun.core.errors import UsageError
from spotrun.datasets.spec import is_remote
from spotrun.train.data.source import ARCHIVE_SUFFIXES, NAMED_SETS

# A data set's name as the recipes give it: no path, no file suffix.
SET_NAME = re.compile(r"[A-Za-z0-9_-]+")
# How the recipes' own sets are best pushed: ImageNet training-ready at the size resnet50-*
# reads, OpenWebText as GPT-2 tokens.
PUSH_FORMS = {
    "imagenet": ("./imagenet", " --max-side 256"),
    "openwebtext": ("./openwebtext.txt", " --tokenizer gpt2"),
}


@dataclass(frozen=True)
class DataAdvice:
    """A data set a launch on AWS names but this machine lacks, and how to put it in S3."""

    message: str
    hint: str

    def error(self) -> UsageError:
        return UsageError(self.message, hint=self.hint)


def aws_data_advice(data: str, cloud: str, settings: Settings) -> DataAdvice | None:
    """For an AWS launch whose recipe names a data set (`imagenet`) that is not in this
    machine's data folder: the lines that push it to S3 and launch with it; else None."""
    if cloud != "aws" or data == "digits" or is_remote(data) or not SET_NAME.fullmatch(data):
        return None
    folder = settings.data_path
    for candidate in NAMED_SETS.get(data, (data,)):
        if any((folder / f"{candidate}{suffix}").exists() for suffix in ("", *ARCHIVE_SUFFIXES)):
            return None
    uri = f"s3://{data_bucket(settings) or 'BUCKET'}/{data}"
    source, options = PUSH_FORMS.get(data, (f"./{data}", ""))
    return DataAdvice(
        f"data set '{data}' is not in the data folder {folder}; on AWS it may live in S3",
        hint=f"push it once: `spotrun data push {source} {uri}{options}`, "
        f"then launch with `--set data={uri}`",
    )
