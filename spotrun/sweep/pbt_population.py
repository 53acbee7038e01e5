"""The sweep supervisor's side of population-based training (the rule is spotrun.sweep.pbt).

A generation's trials launch only when the generation before has ended. Then each member's
next step is decided (exploit and explore), written to the ledger (its values, its lineage
with the checkpoint's name, step and SHA-256), and, when its run is made, the parent's newest
whole checkpoint is copied into the new run's folder here. The run's first job start puts it
on whichever instance the run gets (the run's own checkpoints go onto a new instance the
same way, spotrun.remote.jobprep.restore_checkpoints), and the trainer resumes from it.

Everything is read back from the ledger and the run folders, so a restarted controller picks
the population up where it was: a decision already written stays as it was.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

from spotrun.core.checkpoint_files import newest_complete_checkpoint
from spotrun.core.metrics_file import read_all
from spotrun.core.rundir import CHECKPOINT_NAME, CHECKPOINTS_DIR, METRICS_FILE
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.pbt_lineage import LineageRecord, LineageStore
from spotrun.store.sweeps import SweepRecord, SweepStore, TrialRecord, TrialStatus
from spotrun.sweep import pbt

log = logging.getLogger(__name__)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Population:
    def __init__(self, ledger: Ledger, store: SweepStore, sweep: SweepRecord) -> None:
        self.ledger = ledger
        self.store = store
        self.lineage = LineageStore(ledger)
        self.sweep = sweep
        self.spec = sweep.spec
        assert self.spec.trials is not None
        self.size = self.spec.trials

    def segment_overrides(self, trial: TrialRecord) -> list[str]:
        """The trial trains up to its generation's last epoch."""
        generation, _member = pbt.locate(trial.index, self.size)
        return [f"epochs={pbt.segment_epochs(self.spec, generation)}"]

    def ready(self, trial: TrialRecord) -> TrialRecord | None:
        """The pending trial with its values, once it may launch; None while the generation
        before it is still going."""
        generation, _member = pbt.locate(trial.index, self.size)
        if generation == 0:
            return trial
        lineage = self.lineage.of_sweep(self.sweep.id)
        if trial.index not in lineage:
            before = self._generation(generation - 1)
            if any(not self._ended(t) for t in before):
                return None
            self._decide(generation, before)
        return next(t for t in self.store.trials(self.sweep.id) if t.index == trial.index)

    def _generation(self, generation: int) -> list[TrialRecord]:
        first = generation * self.size
        trials = self.store.trials(self.sweep.id)
        return [t for t in trials if first <= t.index < first + self.size]

    def _ended(self, trial: TrialRecord) -> bool:
        if trial.status is TrialStatus.SKIPPED:
            return True
        run = self._run(trial)
        return run is not None and run.is_terminal

    def _run(self, trial: TrialRecord) -> RunRecord | None:
        return None if trial.run_id is None else self.ledger.get_run(trial.run_id)

    def _decide(self, generation: int, before: list[TrialRecord]) -> None:
        members = []
        checkpoints: dict[int, tuple[Path, int] | None] = {}
        values: dict[int, float | None] = {}
        for trial in before:
            run = self._run(trial)
            found = None if run is None else newest_complete_checkpoint(run.run_dir)
            value = None
            if run is not None:
                value = pbt.last_value(read_all(run.run_dir / METRICS_FILE), self.spec.metric)
            checkpoints[trial.index], values[trial.index] = found, value
            _gen, member = pbt.locate(trial.index, self.size)
            members.append(pbt.Member(member, trial.index, value, trial.params, found is not None))
        by_member = {m.member: m for m in members}
        for step in pbt.exploit_explore(self.spec, members, generation):
            index = generation * self.size + step.member
            found = checkpoints[step.parent_trial]
            self.store.set_params(self.sweep.id, index, step.params)
            self.lineage.record(
                LineageRecord(
                    sweep_id=self.sweep.id,
                    index=index,
                    member=step.member,
                    generation=generation,
                    parent_index=step.parent_trial,
                    exploited=step.exploited,
                    checkpoint=None if found is None else found[0].name,
                    step=None if found is None else found[1],
                    sha256=None if found is None else file_sha256(found[0]),
                    parent_value=values[step.parent_trial],
                    params_before=dict(by_member[step.member].params),
                    params_after=step.params,
                )
            )

    def seed_checkpoint(self, trial: TrialRecord, run: RunRecord) -> None:
        """Copy the parent's checkpoint of the lineage into the new run's folder, before its
        job first starts (again after a restart, while the run has no checkpoint of its own)."""
        rec = self.lineage.of_sweep(self.sweep.id).get(trial.index)
        if rec is None or rec.checkpoint is None:
            return
        folder = run.run_dir / CHECKPOINTS_DIR
        if folder.is_dir() and any(CHECKPOINT_NAME.fullmatch(p.name) for p in folder.iterdir()):
            return
        parent = next(t for t in self.store.trials(self.sweep.id) if t.index == rec.parent_index)
        parent_run = self._run(parent)
        assert parent_run is not None
        source = parent_run.run_dir / CHECKPOINTS_DIR / rec.checkpoint
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{rec.checkpoint}.part"
        try:
            shutil.copyfile(source, partial)
            partial.replace(folder / rec.checkpoint)
        except OSError as exc:  # its folder was removed: the member trains from scratch, said
            partial.unlink(missing_ok=True)
            self.ledger.add_event(
                run.id,
                "sweep",
                f"PBT generation {rec.generation}: could not copy {source} "
                f"({exc.strerror or exc}); this run trains from scratch",
            )
            return
        how = "copied the weights of" if rec.exploited else "goes on from"
        self.ledger.add_event(
            run.id,
            "sweep",
            f"PBT generation {rec.generation}: {how} trial {rec.parent_index} "
            f"({rec.checkpoint}, step {rec.step}, sha256 {rec.sha256})",
        )
