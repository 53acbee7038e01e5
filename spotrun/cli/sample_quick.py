"""`spotrun sample`'s body, and its plain forms answered without typer.

Before its first character `spotrun sample` pays for torch (~1 s, unavoidable), and through
the full CLI also for typer, click, the command modules and typer's per-option pydantic
adapters (~0.2 s, more on a loaded machine). So spotrun/cli/entry.py hands a plain `sample RUN
[--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]` here; anything else
(help, `--option=value`, a value typer would refuse, an option this parser does not know)
goes to the full CLI, which says what is wrong. spotrun/cli/training.py's typer command runs
the same body with the same defaults (SampleWords).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cli.common import print_error
from spotrun.cli.library import api
from spotrun.core.errors import SpotrunError
from spotrun.core.lazy import lazy_module

if TYPE_CHECKING:
    from spotrun.train import sample
else:  # torch (~1 s): only when sampling, not for `spotrun sample --help`
    sample = lazy_module("spotrun.train.sample")


@dataclass(frozen=True)
class SampleWords:
    """What `spotrun sample` was asked, with its defaults."""

    run: str
    prompt: str = ""
    tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = None
    seed: int = 0


def _at_least(least: float, kind: Callable[[str], float]) -> Callable[[str], float | None]:
    def read(word: str) -> float | None:
        value = kind(word)
        return value if value >= least else None

    return read


# Each option's reader: the value, or None where typer would refuse it (its min=).
READERS: dict[str, tuple[str, Callable[[str], object]]] = {
    "--prompt": ("prompt", str),
    "--tokens": ("tokens", _at_least(1, int)),
    "--temperature": ("temperature", _at_least(0.0, float)),
    "--top-k": ("top_k", _at_least(1, int)),
    "--seed": ("seed", int),
}


def plain_sample(args: list[str]) -> SampleWords | None:
    """The words after `sample` in a plain form, read; None for the full CLI to answer."""
    runs: list[str] = []
    asked: dict[str, Any] = {}
    words = iter(args)
    for word in words:
        if not word.startswith("-"):
            runs.append(word)
            continue
        value = next(words, None)
        if word not in READERS or value is None or value.startswith("-"):
            return None
        field, reader = READERS[word]
        try:
            asked[field] = reader(value)
        except ValueError:
            return None
        if asked[field] is None:
            return None
    return SampleWords(runs[0], **asked) if len(runs) == 1 else None


def quick_sample(args: list[str]) -> int | None:
    """The exit code of a plain `sample` answered here, or None for the full CLI."""
    words = plain_sample(args)
    if words is None:
        return None
    try:
        show_sample(words)
    except SpotrunError as exc:
        print_error(exc.user_message())
        return exc.exit_code
    return 0


def show_sample(words: SampleWords) -> None:
    """Print the sampled text, each character as it comes."""
    folder = Path(words.run)
    # the ledger's light read: a run's full status would import the launch machinery (~0.4 s)
    run_dir = folder if folder.is_dir() else api.open_ledger().resolve(words.run).run_dir
    asked = {f.name: getattr(words, f.name) for f in fields(words) if f.name != "run"}
    for piece in sample.sample_stream(run_dir, **asked):
        print(piece, end="", flush=True)
    print(flush=True)
