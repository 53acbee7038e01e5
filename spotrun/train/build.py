"""From a recipe to a running Trainer: the body of `spotrun train`, plain or under torchrun."""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import numpy as np
import torch

from spotrun.core.errors import UsageError
from spotrun.core.exitcodes import CHECKPOINTED
from spotrun.core.node_order import check_node_rank
from spotrun.core.rundir import (
    CHECKPOINTS_DIR,
    METRICS_FILE,
    PROGRESS_FILE,
    RECIPE_FILE,
    THREADS_VAR,
    TRACE_FILE,
)
from spotrun.recipes.base import Recipe
from spotrun.recipes.batching import plan_words
from spotrun.train.batch_plan import BatchPlan
from spotrun.train.callbacks import Callback, ConsoleProgress, MetricsFile
from spotrun.train.curves import TensorBoardCurves
from spotrun.train.data.loading import load_data
from spotrun.train.data.text import EvalWindows, TextWindows, write_vocabulary
from spotrun.train.device import (
    DeviceCapabilities,
    PrecisionProbe,
    capabilities_of,
    decide_channels_last,
    wants_probe,
)
from spotrun.train.device_record import read_record, write_record
from spotrun.train.distributed import LaunchEnv, init_process_group, leave_process_group
from spotrun.train.fsdp import FullyShard, choose_fsdp
from spotrun.train.methods import build_methods
from spotrun.train.methods.auto import ResolvedMethods, precision_asked, resolve_methods
from spotrun.train.models import build_model
from spotrun.train.models.gpt_speedrun import head_lr_groups
from spotrun.train.optim.muon import muon_for
from spotrun.train.precision_probe import image_shape_of, probe_cpu_precision
from spotrun.train.progress import ProgressFile
from spotrun.train.text_metrics import TextMetrics
from spotrun.train.trackers import configured_trackers
from spotrun.train.trainer import FitResult, Trainer


def exit_checkpointed() -> NoReturn:
    """Leave at once with CHECKPOINTED after a stop signal's checkpoint is on disk.

    Everything that matters is already durable (the checkpoint is fsynced, metrics lines are
    closed); a normal interpreter shutdown with torch loaded takes another 1-2 s here, which a
    spot instance's two-minute notice has better uses for.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(CHECKPOINTED)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe.optimizer == "adamw":
        groups = head_lr_groups(model, recipe.lr)  # a GPT's untied head may have its own rate
        return torch.optim.AdamW(
            groups, lr=recipe.lr, betas=recipe.betas, weight_decay=recipe.weight_decay
        )
    if recipe.optimizer == "muon":
        return muon_for(
            model,
            lr=recipe.lr,
            muon_lr=recipe.muon_lr,
            momentum=recipe.muon_momentum,
            weight_decay=recipe.weight_decay,
        )
    return torch.optim.SGD(
        params,
        lr=recipe.lr,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov and recipe.momentum > 0,
        weight_decay=recipe.weight_decay,
    )


def training_threads(recipe: Recipe) -> int | None:
    """SPOTRUN_THREADS when the placement chose (the local cloud: one per free core), else the
    recipe's `threads` (None: torch's default)."""
    chosen = os.environ.get(THREADS_VAR, "").strip()
    return int(chosen) if chosen.isdigit() and int(chosen) > 0 else recipe.threads


def build_trainer(
    recipe: Recipe,
    run_dir: Path,
    launch: LaunchEnv | None = None,
    extra_callbacks: list[Callback] | None = None,
) -> Trainer:
    trainer, _ = build_trainer_on_device(recipe, run_dir, launch, extra_callbacks)
    return trainer


def build_trainer_on_device(
    recipe: Recipe,
    run_dir: Path,
    launch: LaunchEnv | None = None,
    extra_callbacks: list[Callback] | None = None,
) -> tuple[Trainer, ResolvedMethods]:
    """The trainer, and what the recipe's `auto` methods became on this device (and why)."""
    launch = launch or LaunchEnv()
    threads = training_threads(recipe)
    if threads is not None:
        torch.set_num_threads(threads)
    device = launch.device()
    caps = capabilities_of(device)
    # Every rank builds the same initial model from the same seed (DDP also broadcasts it).
    seed_everything(recipe.seed)
    # Batches are assembled and augmented where the model trains (a cached set on the GPU).
    train, test = load_data(recipe, rank=launch.rank, world_size=launch.world_size, device=device)
    probe = None if launch.distributed else measured_precision(recipe, run_dir, caps, train)
    resolved = resolve_methods(recipe.methods, caps, probe)
    check_accumulation(resolved.methods, train.plan)
    algorithms = build_methods(resolved.methods)
    if recipe.text is not None:
        assert isinstance(test, EvalWindows)
        algorithms.append(TextMetrics(test.tokens_per_char))
    model = build_model(recipe.model, recipe.num_classes, **recipe.model_options).to(device)
    optimizer = make_optimizer(model, recipe)
    sharding = choose_fsdp(
        recipe.fsdp, model, optimizer, device,
        world_size=launch.world_size, processes_here=launch.processes_here,
        methods=resolved.methods,
    )  # fmt: skip
    if sharding.on:
        algorithms.append(FullyShard())  # last: it shards what the methods' surgery made
    if launch.rank == 0 and recipe.fsdp != "off":
        print(sharding.reason, flush=True)
    settings = recipe.model_dump(mode="json")
    config = {"recipe": recipe.name, "resolved": settings}
    trainer = Trainer(
        model=model,
        optimizer=optimizer,
        train_data=train,
        eval_data=test,
        max_epochs=recipe.epochs,
        algorithms=algorithms,
        callbacks=[
            MetricsFile(run_dir / METRICS_FILE),
            ConsoleProgress(),
            TensorBoardCurves(run_dir),  # curves for `tensorboard --logdir SPOTRUN_HOME/runs`
            *configured_trackers(run_dir, settings),  # W&B, MLflow: if configured
            ProgressFile(run_dir / PROGRESS_FILE),
            *(extra_callbacks or []),
        ],
        checkpoint_dir=run_dir / CHECKPOINTS_DIR,
        checkpoint_every_steps=recipe.checkpoint_every_steps,
        eval_every_epochs=recipe.eval_every_epochs,
        config=config,
        device=device,
    )
    if launch.distributed:
        # Each rank its own random streams (MixUp pairs, CutOut boxes, dropped blocks), so
        # ranks do not repeat each other's augmentation. Checkpoints keep every rank's state.
        seed_everything(recipe.seed * 1_000_003 + launch.rank)
    return trainer, resolved


def check_accumulation(methods: Mapping[str, object], plan: BatchPlan) -> None:
    """Refuse a method that needs the whole share in one pass where the plan accumulates."""
    if plan.accumulation > 1 and "sam" in methods:
        raise UsageError(
            f"sam recomputes the loss on one batch, but {plan.describe()}: each process's "
            "share is cut into micro-batches",
            hint="raise device_batch to the share (--set device_batch=N), use more GPUs, or "
            "drop sam",
        )


def measured_precision(
    recipe: Recipe, run_dir: Path, caps: DeviceCapabilities, train: object
) -> PrecisionProbe | None:
    """bf16 against fp32 timed on this CPU, where `auto` precision needs it to decide: kept
    from the run's device record when it trained on this same device before (a resume makes
    the same choice), else measured now. None where the capabilities alone decide.

    One process only: ranks of a distributed run could measure differently, so there the
    capabilities decide."""
    if not wants_probe(caps) or precision_asked(recipe.methods) != "auto":
        return None
    before = read_record(run_dir)
    kept = (
        PrecisionProbe.from_dict(before.probe) if before and before.device == caps.line() else None
    )
    if kept is not None:
        return kept
    shape = image_shape_of(train, recipe.image_size)
    if shape is None:
        return None
    print("precision auto: timing bf16 against fp32 on this CPU (a few steps)", flush=True)
    return probe_cpu_precision(
        lambda: build_model(recipe.model, recipe.num_classes, **recipe.model_options),
        shape,
        fp32_channels_last=decide_channels_last(caps, "fp32").use == "on",
    )


def train_recipe(recipe: Recipe, run_dir: Path, launch: LaunchEnv | None = None) -> FitResult:
    """Train `recipe` in `run_dir`, resuming from its newest checkpoint if there is one.

    Under torchrun (WORLD_SIZE > 1 in the environment) this process is one rank of the job:
    it joins the process group, and only rank 0 writes files in `run_dir`.
    """
    launch = launch or LaunchEnv.from_environ()
    check_node_rank()  # a multi-node run: rank 0 must be where spotrun looks for checkpoints
    joined = init_process_group(launch)
    try:
        # Built first: a method that does not fit the model is refused before anything is
        # written.
        trainer, resolved = build_trainer_on_device(recipe, run_dir, launch)
        if launch.rank == 0:
            run_dir.mkdir(parents=True, exist_ok=True)
            caps = capabilities_of(trainer.state.device)
            choices = [c.to_dict() for c in resolved.choices]
            probe = resolved.probe.to_dict() if resolved.probe else None
            record = write_record(run_dir, caps.line(), caps.to_dict(), choices, probe)
            print(f"device {record.line()}", flush=True)
            recipe_json = json.dumps(recipe.model_dump(mode="json"), indent=2)
            (run_dir / RECIPE_FILE).write_text(recipe_json)
            if isinstance(trainer.train_data, TextWindows) and trainer.train_data.tokenizer:
                write_vocabulary(run_dir, trainer.train_data.tokenizer)
            ranks = f" on {launch.world_size} processes" if launch.distributed else ""
            ranks += f" ({plan_words(trainer.train_data.plan, recipe, caps.kind)})"
            methods = ", ".join(a.name for a in trainer.engine.algorithms) or "none"
            threads = f"; {torch.get_num_threads()} CPU threads" if caps.kind == "cpu" else ""
            print(
                f"training {recipe.name} in {run_dir}{ranks}; methods: {methods}{threads}",
                flush=True,
            )
        result = trainer.fit()
        if launch.rank == 0:
            summary = json.dumps(trainer.engine.summary(), indent=2)
            (run_dir / TRACE_FILE).write_text(summary + "\n")
        return result
    finally:
        if joined:
            leave_process_group()
