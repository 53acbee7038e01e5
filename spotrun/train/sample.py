"""Text from a language-model run: the model of its newest checkpoint, continuing a prompt.

The run folder holds what is needed: recipe.json (model, methods, tokenizer, data) and
checkpoints/. The model is rebuilt as the trainer built it (the methods' INIT surgery
included) so the checkpoint's weights fit it; a char tokenizer is the run's vocabulary.json
(written when training starts), or for older runs rebuilt from the recipe's text file (its
vocabulary is the file's characters); byte and gpt2 tokenizers need nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch

from spotrun.core.config import load_settings
from spotrun.core.errors import TrainingError, UsageError
from spotrun.core.rundir import CHECKPOINTS_DIR, RECIPE_FILE
from spotrun.recipes.base import Recipe
from spotrun.train.checkpoint import Checkpointer
from spotrun.train.data.source import resolve_text_file
from spotrun.train.data.text import Tokenizer, read_text, read_vocabulary
from spotrun.train.methods import build_methods
from spotrun.train.methods.gpt_surgery import _GptSurgery
from spotrun.train.models import build_model
from spotrun.train.models.gpt import GPT

# What bytes or GPT-2 tokens decode to while they end inside a multi-byte character.
INCOMPLETE = "\ufffd"

# Below this many parameters a token's matrix products are too small to share out: torch's
# worker threads then cost more in hand-offs than they save, and far more when other processes
# hold the other cores (shakespeare-fast's 0.8M, 2 cores at load average 3: 200 characters in
# 2.8 s on one thread, 5.1 s on two; bench/sample_speed.py). A bigger model keeps torch's own
# thread count.
ONE_THREAD_BELOW_PARAMS = 10_000_000


def load_run_recipe(run_dir: Path) -> Recipe:
    path = run_dir / RECIPE_FILE
    if not path.is_file():
        raise UsageError(
            f"{run_dir} has no {RECIPE_FILE}", hint="give a run that has started training"
        )
    recipe = Recipe.model_validate(json.loads(path.read_text()))
    if recipe.text is None:
        raise UsageError(
            f"run recipe {recipe.name} is not a language model",
            hint="sample from a run of a text recipe (shakespeare-fast, ...)",
        )
    return recipe


def run_tokenizer(recipe: Recipe, run_dir: Path | None = None) -> Tokenizer:
    assert recipe.text is not None
    if recipe.text.tokenizer in ("byte", "gpt2"):  # fixed vocabularies: no text needed
        return Tokenizer(recipe.text.tokenizer)
    recorded = None if run_dir is None else read_vocabulary(run_dir)
    if recorded is not None:
        return recorded
    path = resolve_text_file(recipe.data, load_settings().data_path)
    return Tokenizer.fit("char", read_text(path))


def load_model(run_dir: Path, recipe: Recipe) -> GPT:
    """The run's model with its newest readable checkpoint's weights, in eval mode.

    Only what sampling needs: the model and its INIT surgery (the GPT methods that change its
    parts, so the checkpoint meets the same model), none of the trainer; the checkpoint is
    mapped, so only the model's weights are read (an optimizer would also import torch's
    compiler, ~2 s)."""
    loaded = Checkpointer(run_dir / CHECKPOINTS_DIR).load_latest(map_location="cpu", mmap=True)
    if loaded is None:
        raise TrainingError(
            f"{run_dir} has no checkpoint yet", hint="wait for the first epoch to end"
        )
    model = build_model(recipe.model, recipe.num_classes, **recipe.model_options)
    if not isinstance(model, GPT):
        raise UsageError(f"run model {recipe.model} is not a GPT", hint="sample from a text run")
    for method in build_methods(recipe.methods):
        if isinstance(method, _GptSurgery):
            method.change(model)
    model.load_state_dict(loaded.payload["model"])
    return model.eval()


def sampling_threads(model: GPT) -> int:
    """How many threads torch samples `model` with (ONE_THREAD_BELOW_PARAMS)."""
    params = sum(p.numel() for p in model.parameters())
    return 1 if params < ONE_THREAD_BELOW_PARAMS else torch.get_num_threads()


def sample_stream(
    run_dir: Path,
    *,
    prompt: str = "",
    tokens: int = 200,
    temperature: float = 0.8,
    top_k: int | None = None,
    seed: int = 0,
    cache: bool = True,
) -> Iterator[str]:
    """The prompt, then the text of `tokens` sampled tokens, piece by piece as they come
    (a piece that would end inside a character waits for the token that completes it)."""
    recipe = load_run_recipe(run_dir)
    tokenizer = run_tokenizer(recipe, run_dir)
    start = prompt or "\n"
    ids: list[int] = tokenizer.encode(start).tolist()
    model = load_model(run_dir, recipe)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(sampling_threads(model))
    try:
        shown = tokenizer.decode(ids)
        if prompt:
            yield shown
        told = len(shown)
        generator = torch.Generator().manual_seed(seed)
        for token in model.stream(
            torch.tensor([ids]),
            tokens,
            temperature=temperature,
            top_k=top_k,
            vocab=tokenizer.vocab_size,
            generator=generator,
            cache=cache,
        ):
            ids.append(int(token))
            text = tokenizer.decode(ids)
            if not text.endswith(INCOMPLETE):
                yield text[told:]
                told = len(text)
        rest = tokenizer.decode(ids)[told:]
        if rest:
            yield rest
    finally:  # a library caller's own torch keeps its thread count
        torch.set_num_threads(threads_before)


def sample_text(
    run_dir: Path,
    *,
    prompt: str = "",
    tokens: int = 200,
    temperature: float = 0.8,
    top_k: int | None = None,
    seed: int = 0,
    cache: bool = True,
) -> str:
    """The prompt and `tokens` sampled tokens after it, decoded."""
    pieces = sample_stream(
        run_dir,
        prompt=prompt,
        tokens=tokens,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        cache=cache,
    )
    return "".join(pieces)
