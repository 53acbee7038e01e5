"""A recipe's global batch on the devices a run gets, in words: for `recipes show`, the
training process's first line and a launch's --dry-run.

A recipe states its global batch (`batch_size`, samples per optimizer step) and the most one
device computes at once (`device_batch`); spotrun.train.batch_plan derives each process's
share and gradient accumulation from them.
"""

from __future__ import annotations

from spotrun.recipes.base import Recipe
from spotrun.train.batch_plan import BatchPlan, plan_batches


def recipe_plan(recipe: Recipe, processes: int) -> BatchPlan:
    """How `processes` processes make the recipe's global batch (UsageError if they cannot)."""
    return plan_batches(recipe.batch_size, processes, recipe.device_batch)


def processes_for(recipe: Recipe, gpus: int | None = None, nodes: int | None = None) -> int:
    """Training processes of a run: one per GPU over all nodes, one on a CPU-only machine."""
    gpus = recipe.resources.gpus if gpus is None else gpus
    nodes = recipe.resources.nodes if nodes is None else nodes
    return max(1, gpus) * max(1, nodes)


def plan_words(
    plan: BatchPlan, recipe: Recipe, device_kind: str = "cuda", *, alternative: str = ""
) -> str:
    """'1,024 images per step = 4 GPUs x 128 x 2 accumulated'; a language model's also says
    its tokens per step. `device_kind` "cuda" counts GPUs, anything else processes;
    `alternative` is another way to make the same batch ('4 GPUs x 128 x 2 accumulated')."""
    device = "GPU" if device_kind == "cuda" else "process"
    unit = "images" if recipe.text is None else f"windows of {recipe.text.block_size:,} tokens"
    words = plan.describe(unit, device) + (f", or {alternative}" if alternative else "")
    if recipe.text is not None:
        words += f" ({plan.global_batch * recipe.text.block_size:,} tokens per step)"
    return words


def global_batch_line(recipe: Recipe, gpus: int | None = None, nodes: int | None = None) -> str:
    """One line for a launch's --dry-run: how the global batch is made on the run's GPUs
    (the recipe's own when gpus is None). Raises UsageError where the GPUs cannot split it, so
    a launch can refuse before anything starts."""
    processes = processes_for(recipe, gpus, nodes)
    on_gpus = (recipe.resources.gpus if gpus is None else gpus) > 0
    plan = recipe_plan(recipe, processes)
    return "global batch: " + plan_words(plan, recipe, "cuda" if on_gpus else "cpu")


def global_batch_summary(recipe: Recipe) -> str:
    """For `recipes show`: the recipe's own devices and, for a multi-GPU recipe, half as many
    (what spot capacity offers when the large pools are dry), e.g. '1,024 images per step =
    8 GPUs x 128, or 4 GPUs x 128 x 2 accumulated'."""
    processes = processes_for(recipe)
    on_gpus = recipe.resources.gpus > 0
    half = processes // 2
    alternative = ""
    if on_gpus and half >= 1 and recipe.batch_size % half == 0:
        alternative = recipe_plan(recipe, half).made_of("GPU")
    plan = recipe_plan(recipe, processes)
    return plan_words(plan, recipe, "cuda" if on_gpus else "cpu", alternative=alternative)
