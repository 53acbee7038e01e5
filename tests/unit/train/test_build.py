"""The recipe path (`spotrun train`'s body) in-process: methods from a recipe, model surgery
re-applied before a checkpoint loads, exact resume; and reading torchrun's environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spotrun.core.errors import UsageError
from spotrun.recipes import get_recipe
from spotrun.train.build import build_trainer
from spotrun.train.distributed import LaunchEnv
from spotrun.train.wrapping import unwrap_model
from tests.unit.train.tiny import StopAt

# Every method that rebuilds or converts the model, on the digits recipe, for one epoch.
SURGERY = [
    "epochs=1",
    "threads=1",
    'methods.patch_whitening={"num_images": 200}',
    'methods.blurpool={"min_channels": 1}',
    "methods.concat_pooling={}",
    "methods.no_decay_norm_bias={}",
    'methods.channels_last={"when": "always"}',
    'methods.ema={"decay": 0.9}',
    'methods.compile={"backend": "eager", "when": "always"}',
]


def test_recipe_with_model_surgery_resumes_bitwise(tmp_path: Path) -> None:
    recipe = get_recipe("digits-fast", SURGERY)
    straight = build_trainer(recipe, tmp_path / "a")
    straight.fit()
    build_trainer(recipe, tmp_path / "b", extra_callbacks=[StopAt(9)]).fit()
    resumed = build_trainer(recipe, tmp_path / "b")
    resumed.fit()
    assert resumed.resumed_from is not None
    a = unwrap_model(straight.state.model).state_dict()
    b = unwrap_model(resumed.state.model).state_dict()
    assert a.keys() == b.keys() and "stem.whiten.weight" in a and "head.weight" in a
    assert all(torch.equal(a[k], b[k]) for k in a)
    ema_a = straight.engine.state_dict()["ema"]["model"]
    ema_b = resumed.engine.state_dict()["ema"]["model"]
    assert all(torch.equal(ema_a[k], ema_b[k]) for k in ema_a)
    assert straight.state.metrics["test_acc"] > 0.2  # learning after one epoch (chance: 0.1)


def test_launch_env_from_torchrun_variables() -> None:
    env = LaunchEnv.from_environ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (env.rank, env.world_size, env.local_rank, env.distributed) == (1, 2, 1, True)
    assert LaunchEnv.from_environ({}) == LaunchEnv(0, 1, 0)
    with pytest.raises(UsageError, match="does not fit WORLD_SIZE"):
        LaunchEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(UsageError, match="must be integers"):
        LaunchEnv.from_environ({"RANK": "one"})
