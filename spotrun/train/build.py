"""From a recipe to a running Trainer: the body of `spotrun train`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

from spotrun.recipes.base import Recipe
from spotrun.train.callbacks import METRICS_FILE, ConsoleProgress, MetricsFile
from spotrun.train.data.loading import load_data
from spotrun.train.methods import build_methods
from spotrun.train.models import build_model
from spotrun.train.trainer import FitResult, Trainer

CHECKPOINT_DIR = "checkpoints"
RECIPE_FILE = "recipe.json"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    return torch.optim.SGD(
        params,
        lr=recipe.lr,
        momentum=recipe.momentum,
        nesterov=recipe.nesterov and recipe.momentum > 0,
        weight_decay=recipe.weight_decay,
    )


def build_trainer(recipe: Recipe, run_dir: Path) -> Trainer:
    if recipe.threads is not None:
        torch.set_num_threads(recipe.threads)
    seed_everything(recipe.seed)
    train, test = load_data(recipe)
    algorithms = build_methods(recipe.methods)
    model = build_model(recipe.model, recipe.num_classes, **recipe.model_options)
    optimizer = make_optimizer(model, recipe)
    return Trainer(
        model=model,
        optimizer=optimizer,
        train_data=train,
        eval_data=test,
        max_epochs=recipe.epochs,
        algorithms=algorithms,
        callbacks=[MetricsFile(run_dir / METRICS_FILE), ConsoleProgress()],
        checkpoint_dir=run_dir / CHECKPOINT_DIR,
        checkpoint_every_steps=recipe.checkpoint_every_steps,
        eval_every_epochs=recipe.eval_every_epochs,
        config={"recipe": recipe.name, "resolved": recipe.model_dump(mode="json")},
    )


def train_recipe(recipe: Recipe, run_dir: Path) -> FitResult:
    """Train `recipe` in `run_dir`, resuming from its newest checkpoint if there is one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RECIPE_FILE).write_text(json.dumps(recipe.model_dump(mode="json"), indent=2))
    trainer = build_trainer(recipe, run_dir)
    print(f"training {recipe.name} in {run_dir}", flush=True)
    return trainer.fit()
