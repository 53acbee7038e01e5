"""Logging to Weights & Biases or MLflow, when the user has them installed and configured.

Neither is a dependency of spotrun: each callback imports its package only when training
starts, and only when the training process's environment configures it with the package's own
variables:

- W&B: `WANDB_MODE` (e.g. `offline`) or `WANDB_API_KEY` is set (and `WANDB_MODE` is not
  `disabled`); `WANDB_PROJECT` names the project (default "spotrun"). Its files go in the run
  folder (RUN_DIR/wandb), so an offline run comes back with the rest and `wandb sync` uploads it.
- MLflow: `MLFLOW_TRACKING_URI` is set (a server, or a file store such as file:///path/mlruns);
  `MLFLOW_EXPERIMENT_NAME` names the experiment (default "spotrun").

Both keep one tracker run per spotrun run, named by the run folder: a resumed run logs into the
run it logged into before. A tracker that fails to start turns itself off with a line saying
why; the training goes on (its curves are in metrics.jsonl and the TensorBoard files anyway).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spotrun.core.rundir import METRICS_FILE
from spotrun.train.callbacks import Callback
from spotrun.train.curves import scalar_metrics
from spotrun.train.events import Event
from spotrun.train.state import State

RUN_TAG = "spotrun.run"  # the MLflow tag that finds a run's tracker run again on resume


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def wandb_configured(environ: Mapping[str, str]) -> bool:
    mode = environ.get("WANDB_MODE", "").strip().lower()
    if mode == "disabled":
        return False
    return bool(mode or environ.get("WANDB_API_KEY"))


def mlflow_configured(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("MLFLOW_TRACKING_URI", "").strip())


def configured_trackers(
    run_dir: Path, config: dict[str, Any], environ: Mapping[str, str] | None = None
) -> list[Callback]:
    """The tracker callbacks this environment asks for and has the packages of."""
    env = os.environ if environ is None else environ
    found: list[Callback] = []
    if wandb_configured(env) and _installed("wandb"):
        found.append(WandbTracker(run_dir, config, project=env.get("WANDB_PROJECT") or "spotrun"))
    if mlflow_configured(env) and _installed("mlflow"):
        experiment = env.get("MLFLOW_EXPERIMENT_NAME") or "spotrun"
        found.append(MlflowTracker(run_dir, config, experiment=experiment))
    return found


class _Tracker(Callback):
    """Opens at the start of training, logs every evaluation, closes at the end or a stop."""

    label = "tracker"

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.config = config
        self.opened = False

    def on_event(self, event: Event, state: State) -> None:
        if not state.is_main:
            return
        if event is Event.FIT_START:
            self._guarded("start", self._start)
        elif event is Event.EVAL_END and self.opened:
            metrics = scalar_metrics(state.metrics)
            self._guarded("log", lambda: self._log(metrics, state.step))
        elif event in (Event.INTERRUPT, Event.FIT_END) and self.opened:
            self._guarded("finish", self._finish)
            self.opened = False

    def _guarded(self, what: str, action: Any) -> None:
        try:
            action()
            if what == "start":
                self.opened = True
        except Exception as exc:  # a tracker's outage must not end the training
            self.opened = False
            print(
                f"{self.label} logging is off: {what} failed ({type(exc).__name__}: {exc}); "
                f"the curves are still in {METRICS_FILE} and the TensorBoard files",
                file=sys.stderr,
                flush=True,
            )

    @property
    def run_key(self) -> str:
        return self.run_dir.resolve().name

    def _start(self) -> None:
        raise NotImplementedError

    def _log(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError


class WandbTracker(_Tracker):
    label = "W&B"

    def __init__(self, run_dir: Path, config: dict[str, Any], project: str) -> None:
        super().__init__(run_dir, config)
        self.project = project
        self._run: Any = None

    def _start(self) -> None:
        import wandb  # optional dependency (pip install wandb), seconds to import

        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=self.project,
            id=self.run_key,
            name=self.run_key,
            dir=str(self.run_dir),
            config=self.config,
            resume="allow",
        )

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log({**metrics, "trainer/step": step})

    def _finish(self) -> None:
        self._run.finish()
        self._run = None


class MlflowTracker(_Tracker):
    label = "MLflow"

    def __init__(self, run_dir: Path, config: dict[str, Any], experiment: str) -> None:
        super().__init__(run_dir, config)
        self.experiment = experiment
        self._client: Any = None
        self._run_id: str | None = None

    def _start(self) -> None:
        from mlflow.tracking import MlflowClient  # optional dependency, seconds to import

        client = MlflowClient()  # MLFLOW_TRACKING_URI from the environment
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = (
            found.experiment_id if found is not None else client.create_experiment(self.experiment)
        )
        earlier = client.search_runs(
            [experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{self.run_key}'", max_results=1
        )
        if earlier:
            self._run_id = earlier[0].info.run_id
            client.update_run(self._run_id, status="RUNNING")
        else:
            created = client.create_run(
                experiment_id, run_name=self.run_key, tags={RUN_TAG: self.run_key}
            )
            self._run_id = created.info.run_id
            for key, value in sorted(_flat(self.config).items()):
                client.log_param(self._run_id, key, value[:500])  # MLflow's limit on a value
        self._client = client

    def _log(self, metrics: dict[str, float], step: int) -> None:
        assert self._run_id is not None
        for name, value in metrics.items():
            self._client.log_metric(self._run_id, name, value, step=step)

    def _finish(self) -> None:
        assert self._run_id is not None
        self._client.set_terminated(self._run_id)


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested settings as MLflow parameters: dotted keys, text values."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = str(value)
    return out
