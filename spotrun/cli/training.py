"""`spotrun train` (what runs inside a run's tmux session) and `spotrun sample`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from spotrun.cli.complete import complete_run
from spotrun.cli.sample_quick import SampleWords, show_sample
from spotrun.core.exitcodes import SUCCESS
from spotrun.core.lazy import lazy_module
from spotrun.core.rundir import CHECKPOINTS_DIR, METRICS_FILE, RECIPE_FILE

SAMPLE = SampleWords(run="")  # sample's defaults, shared with its plain forms

if TYPE_CHECKING:
    from spotrun import recipes
    from spotrun.train import build
else:  # torch and the training code (~1 s): only when training here, not for `train -h`
    recipes = lazy_module("spotrun.recipes")
    build = lazy_module("spotrun.train.build")


def train(
    recipe: str = typer.Argument(..., help="recipe name"),
    run_dir: Path = typer.Option(
        ..., "--run-dir", help=f"{CHECKPOINTS_DIR}, {METRICS_FILE}, {RECIPE_FILE}"
    ),
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
    resolved = recipes.get_recipe(recipe, set_)
    result = build.train_recipe(resolved, run_dir)
    if result.interrupted:
        if os.environ.get("RANK", "0") == "0":  # under torchrun, one line for the whole job
            print(
                f"checkpointed at step {result.step}; run the same command again to resume",
                flush=True,
            )
        build.exit_checkpointed()
    raise typer.Exit(SUCCESS)


def sample(
    run: str = typer.Argument(
        ...,
        help="run name, a unique prefix of its id, or a run folder",
        autocompletion=complete_run,
    ),
    prompt: str = typer.Option(
        SAMPLE.prompt, "--prompt", help="text to continue (default: a new line)"
    ),
    tokens: int = typer.Option(SAMPLE.tokens, "--tokens", min=1, help="tokens to generate"),
    temperature: float = typer.Option(SAMPLE.temperature, "--temperature", min=0.0),
    top_k: int | None = typer.Option(
        SAMPLE.top_k, "--top-k", min=1, help="sample among the k likeliest"
    ),
    seed: int = typer.Option(SAMPLE.seed, "--seed", help="the sampling seed"),
) -> None:
    """Text from a language-model run's newest checkpoint.

    \b
    Examples:
      spotrun sample RUN
      spotrun sample RUN --prompt "ROMEO:" --tokens 400
    """
    # its plain forms skip typer (spotrun/cli/sample_quick.py); this is the same body
    show_sample(SampleWords(run, prompt, tokens, temperature, top_k, seed))
