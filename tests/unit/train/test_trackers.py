"""Which trackers an environment asks for: W&B's and MLflow's own variables decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotrun.train.trackers import (
    MlflowTracker,
    WandbTracker,
    configured_trackers,
    mlflow_configured,
    wandb_configured,
)


def test_nothing_is_configured_by_default() -> None:
    assert configured_trackers(Path("run"), {}, environ={}) == []
    assert not wandb_configured({"WANDB_MODE": "disabled", "WANDB_API_KEY": "k"})
    assert wandb_configured({"WANDB_MODE": "offline"}) and wandb_configured({"WANDB_API_KEY": "k"})
    assert mlflow_configured({"MLFLOW_TRACKING_URI": "file:///x"})
    assert not mlflow_configured({"MLFLOW_TRACKING_URI": "  "})


def test_configured_and_installed_trackers_are_made() -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    env = {"WANDB_MODE": "offline", "WANDB_PROJECT": "p", "MLFLOW_TRACKING_URI": "file:///x"}
    wandb, mlflow = configured_trackers(Path("run"), {"lr": 0.1}, environ=env)
    assert isinstance(wandb, WandbTracker) and wandb.project == "p"
    assert isinstance(mlflow, MlflowTracker) and mlflow.experiment == "spotrun"


def test_the_launch_carries_the_trackers_variables_only() -> None:
    from spotrun.service.tracker_env import tracker_env

    shell = {
        "WANDB_API_KEY": "k",
        "WANDB_PROJECT": "p",
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "MLFLOW_EXPERIMENT_NAME": " ",  # set but empty: nothing to carry
        "AWS_SECRET_ACCESS_KEY": "never",
        "HOME": "/home/u",
    }
    assert tracker_env(shell) == {
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "WANDB_API_KEY": "k",
        "WANDB_PROJECT": "p",
    }
