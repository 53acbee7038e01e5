"""The environment variables of the experiment trackers spotrun's trainer logs to.

W&B and MLflow are configured by their own variables (spotrun.train.trackers). A user who set
them in the shell that launches a run means the run to log there, wherever it trains: the
launch carries them into the run's job environment (the 0600 env file on the instance, never
a command line), because the job's machine, or the one controller that starts it, does not
have the launching shell's environment.
"""

from __future__ import annotations

from collections.abc import Mapping

TRACKER_PREFIXES = ("WANDB_", "MLFLOW_")


def tracker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The trackers' variables set (non-empty) in `environ`."""
    return {
        key: value
        for key, value in sorted(environ.items())
        if key.startswith(TRACKER_PREFIXES) and value.strip()
    }
