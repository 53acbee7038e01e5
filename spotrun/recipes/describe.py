"""A recipe in words, for `spotrun recipes show`: what it states, needs, trains and switches on.

Every hyperparameter appears, the methods with all their options (defaults filled in) in the
order the trainer applies them, so what is printed is exactly what would run.
"""

from __future__ import annotations

from typing import Any

from spotrun.recipes.base import Recipe
from spotrun.recipes.batching import global_batch_summary
from spotrun.train.methods.catalog import validate_methods

LABEL_WIDTH = 12


def _options(values: dict[str, Any]) -> str:
    parts = []
    for key, value in values.items():
        if isinstance(value, float):
            shown = f"{value:.6g}"
        elif isinstance(value, (list, tuple)):
            shown = (
                "[" + ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in value) + "]"
            )
        else:
            shown = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"{key}={shown}")
    return " ".join(parts) or "(no options)"


def _resources(recipe: Recipe) -> str:
    r = recipe.resources
    if r.gpus == 0:
        gpus = "CPU only"
    else:
        gpus = f"{r.gpus} GPU{'s' if r.gpus > 1 else ''}"
        if r.gpu_model:
            gpus += f" ({r.gpu_model})"
        if r.gpu_memory_gb:
            gpus += f" with >= {r.gpu_memory_gb:g} GB" + (" each" if r.gpus > 1 else "")
    extras = [
        f"{r.nodes} nodes" if r.nodes > 1 else "",
        "spot" if r.spot else "on demand",
        f"disk {r.disk_gb} GB" if r.disk_gb else "",
        f"type {r.instance_type}" if r.instance_type else "",
        f"region {r.region}" if r.region else "",
        f"zone {r.zone}" if r.zone else "",
        "one node only" if not recipe.multi_node else "",
    ]
    return ", ".join([gpus, *(e for e in extras if e)])


def _data(recipe: Recipe) -> str:
    if recipe.data == "digits":
        return "digits: scikit-learn's 8x8 handwritten digits, held in memory"
    train = f"{recipe.image_size} px" if recipe.image_size else "images as stored"
    test = recipe.eval_image_size or recipe.image_size
    sizes = f"train {train}" + (f", test {test} px" if test and test != recipe.image_size else "")
    workers = "auto" if recipe.data_workers is None else str(recipe.data_workers)
    return (
        f"{recipe.data}: {sizes}; normalize {recipe.normalize}; image cache {recipe.image_cache}; "
        f"decode workers {workers}"
    )


def _augment(recipe: Recipe) -> str:
    a = recipe.augment
    parts = []
    if a.crop_padding:
        parts.append(f"pad {a.crop_padding} px ({a.padding_mode}) and crop back")
    if a.translate:
        parts.append(f"shift up to {a.translate} px")
    if a.flip:
        parts.append("mirror half the images")
    if recipe.data != "digits" and recipe.image_cache != "on":
        low, high = a.crop_scale
        parts.append(f"if streamed: random-resized crop of {low:.0%}-{high:.0%} of the area")
    return "; ".join(parts) or "none"


def _text_data(recipe: Recipe) -> str:
    text = recipe.text
    assert text is not None
    evaluated = f"the first {text.eval_tokens:,}" if text.eval_tokens else "all"
    return (
        f"{recipe.data}: {text.tokenizer} tokens in windows of {text.block_size:,}, "
        f"{text.steps_per_epoch:,} steps an epoch; validation: the last {text.val_fraction:.0%} "
        f"of the characters (token files: as pushed), {evaluated} of its tokens evaluated"
    )


def _training(recipe: Recipe) -> str:
    per_step = global_batch_summary(recipe)
    momentum = f"momentum {recipe.momentum:g}" + (" nesterov" if recipe.nesterov else "")
    optimizer = (
        f"{recipe.optimizer} lr {recipe.lr:.6g}, {momentum}"
        if recipe.optimizer == "sgd"
        else f"{recipe.optimizer} lr {recipe.lr:.6g}"
    )
    if recipe.optimizer == "muon":  # two halves, two learning rates
        optimizer = (
            f"muon lr {recipe.muon_lr:.6g} (momentum {recipe.muon_momentum:g} nesterov) on "
            f"hidden matrices, adamw lr {recipe.lr:.6g} on embeddings, head, biases, gains"
        )
    threads = f"; {recipe.threads} CPU threads" if recipe.threads else ""
    return (
        f"{recipe.epochs} epochs, {per_step}; {optimizer}, weight decay {recipe.weight_decay:g}; "
        f"seed {recipe.seed}{threads}"
    )


def describe_recipe(recipe: Recipe) -> list[str]:
    """The lines `spotrun recipes show NAME` prints."""

    def line(label: str, text: str) -> str:
        return f"{label:<{LABEL_WIDTH}} {text}"

    lines = [f"{recipe.name}: {recipe.description}", ""]
    lines.append(line("result", recipe.result))
    lines.append(line("measured by", recipe.measured_with))
    if recipe.target is not None:
        t = recipe.target
        lines.append(line("target", f"{t.metric} {'>=' if t.mode == 'max' else '<='} {t.value:g}"))
    lines.append(line("resources", _resources(recipe)))
    lines.append("")
    if recipe.text is not None:
        lines.append(line("data", _text_data(recipe)))
    else:
        lines.append(line("data", _data(recipe)))
        lines.append(line("augment", _augment(recipe)))
    model_options = f" ({_options(recipe.model_options)})" if recipe.model_options else ""
    outputs = (
        f"a vocabulary of {recipe.num_classes:,}"
        if recipe.text is not None
        else f"{recipe.num_classes} classes"
    )
    lines.append(line("model", f"{recipe.model}{model_options}, {outputs}"))
    lines.append(line("training", _training(recipe)))
    every = recipe.eval_every_epochs
    evaluation = "every epoch" if every == 1 else f"every {every} epochs"
    if recipe.eval_batch_size:
        unit = "windows" if recipe.text is not None else "images"
        evaluation += f", {recipe.eval_batch_size} {unit} per batch"
    lines.append(line("evaluation", evaluation))
    checkpoints = "every epoch" + (
        f" and every {recipe.checkpoint_every_steps} steps" if recipe.checkpoint_every_steps else ""
    )
    lines.append(line("checkpoints", checkpoints))
    parsed = validate_methods(recipe.methods)
    if not parsed:
        lines.append(line("methods", "none"))
        return lines
    lines.append(line("methods", "in the order the trainer applies them:"))
    width = max(len(info.name) for info, _ in parsed)
    for info, options in parsed:
        lines.append(f"  {info.name:<{width}}  {_options(options.model_dump())}")
    return lines
