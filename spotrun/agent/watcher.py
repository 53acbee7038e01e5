"""The instance's own watch: spot notices, the job's progress, the run's caps.

It runs in the background on the instance (started with the job, its pid in watcher.pid),
assembled by the cloud's entry point with the instance's own durable store and its way to end
itself (`python -m spotrun.cloud.aws.instance_watcher ...`: S3 and EC2, with the instance
profile's permissions); the watcher depends on those two small protocols only. Every `--poll`
seconds it asks the metadata service (IMDSv2) for `spot/instance-action` and the rebalance
recommendation.

- On an interruption notice it writes notice.json (the controller's sync brings it home and a
  replacement is requested at once), sends SIGTERM to the job (the trainer checkpoints and
  exits), waits for it until the notice's own `time` less an upload margin (measured on this
  instance's clock, the frame EC2's time and the instance's agree in), and uploads the
  checkpoint, notice.json, exit.json and job.log to the durable store.
- A rebalance recommendation is written to rebalance.json (the controller records it).
- The job never depends on a controller being there: it runs on while it makes progress (its
  log, metrics, data staging or checkpoints move), whether or not any controller is watching.
  The watcher ends the job and terminates its own instance only when the job has ended and
  no controller collected it within `--end-grace` seconds, when the `--deadline-in` (max-hours /
  budget cap, seconds from the watcher's start on this instance's monotonic clock, so that a
  controller whose clock disagrees with the instance's changes nothing) has passed, or when
  the job has made no progress for `--no-progress` seconds.
  Before terminating it uploads the checkpoints and its final files and writes
  self-terminated.json (why, in a word the controller acts on when it comes back), so nothing
  is left billing and nothing is lost.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from spotrun.agent.imds import Imds, MetadataError, notice_time
from spotrun.agent.wrapper import signal_job, write_json_atomic
from spotrun.core.errors import SpotrunError
from spotrun.core.rundir import (
    CHECKPOINTS_DIR,
    EXIT_FILE,
    JOB_LOG_FILE,
    METRICS_FILE,
    NOTICE_FILE,
    REBALANCE_FILE,
    SELF_TERMINATED_FILE,
    SETUP_LOG_FILE,
    STAGING_FILE,
)
from spotrun.core.waiting import poll_until, repeat

log = logging.getLogger("spotrun.watcher")

ACTION_PATH = "meta-data/spot/instance-action"
REBALANCE_PATH = "meta-data/events/recommendations/rebalance"
# Files the durable store receives besides the checkpoints, so the controller learns the
# outcome even when the instance is gone before its last sync.
FINAL_FILES = (NOTICE_FILE, EXIT_FILE, JOB_LOG_FILE, METRICS_FILE, SELF_TERMINATED_FILE)
# What moves while a job makes progress: its output, its evaluations, its data staging, its
# checkpoints folder (a new checkpoint changes the folder's mtime).
PROGRESS_FILES = (JOB_LOG_FILE, SETUP_LOG_FILE, METRICS_FILE, STAGING_FILE, CHECKPOINTS_DIR)

# Why the watcher ended its instance (self-terminated.json's "why"): the controller that comes
# back reads it to end the run the right way instead of replacing the instance.
JOB_ENDED = "job-ended"  # the job ended and nobody collected it within the grace
DEADLINE = "deadline"  # the run's max-hours or budget cap
NO_PROGRESS = "no-progress"  # the job's files stopped moving


@dataclass(frozen=True)
class Ending:
    """Why the instance ends itself now: one of the words above, and a sentence."""

    why: str
    reason: str


class RunUploader(Protocol):
    """The instance's durable store (S3 on AWS), as the watcher uses it."""

    @property
    def where(self) -> str:
        """The store's name in messages, e.g. s3://bucket."""
        ...

    def upload(
        self, run_dir: Path, run_id: str, instance_id: str | None, final_files: tuple[str, ...]
    ) -> list[str]:
        """Push the run's new checkpoints, and `final_files` under the instance's own prefix;
        what was uploaded. Raises SpotrunError (or OSError) when the store refuses."""
        ...


class SelfTerminator(Protocol):
    """The instance's way to end its own billing (TerminateInstances on AWS)."""

    def terminate(self, instance_id: str) -> None:
        """End the instance; raises SpotrunError or MetadataError when that is refused."""
        ...


@dataclass(frozen=True)
class WatchConfig:
    run_dir: Path
    run_id: str
    metadata_url: str
    poll_s: float = 5.0
    no_progress_s: float = 3600.0  # a job whose files have not moved this long is ended; 0: never
    # The max-hours or budget cap: seconds after the watcher's start, on the monotonic clock.
    deadline_in_s: float | None = None
    deadline: float | None = None  # the same as unix time, from a controller before deadline_in_s
    end_grace_s: float = 300.0  # after the job ends, time a controller has to collect it
    terminate: bool = True  # terminate the own instance (False: only report, e.g. tests)
    # After a notice without a readable "time": how long the job may take to checkpoint.
    checkpoint_wait_s: float = 100.0
    # Of the notice's time left, what the upload after the job's checkpoint keeps (on EC2's
    # 120 s: 100 s for the job, as before the notice's time was read).
    upload_margin_s: float = 20.0


class Watcher:
    def __init__(
        self,
        config: WatchConfig,
        imds: Imds | None = None,
        *,
        store: RunUploader | None = None,
        terminator: SelfTerminator | None = None,
    ) -> None:
        self.config = config
        self.imds = imds or Imds(config.metadata_url)
        self.store = store  # None: nowhere to upload (no bucket)
        self.terminator = terminator  # None: the instance cannot end itself here
        self.started = time.time()
        self._started_monotonic = time.monotonic()
        self.instance_id: str | None = None
        self._noticed = False
        self._rebalanced = False
        self._ended_at: float | None = None

    # ------------------------------------------------------------- helpers
    def _file(self, name: str) -> Path:
        return self.config.run_dir / name

    def _job_ended(self) -> bool:
        return self._file(EXIT_FILE).exists()

    def _own_id(self) -> str | None:
        if self.instance_id is None:
            try:
                self.instance_id = self.imds.get("meta-data/instance-id")
            except MetadataError as exc:
                log.warning("%s", exc)
        return self.instance_id

    def stop_job(self, why: str, wait_s: float | None = None) -> bool:
        """SIGTERM the job (the trainer checkpoints) and wait for its exit record, at most
        `wait_s` seconds (by default checkpoint_wait_s)."""
        if self._job_ended():
            return True
        log.info("%s: SIGTERM to the job", why)
        # Through its wrapper (which then waits for the job to finish saving), as `stop` does.
        if not signal_job(self.config.run_dir, signal.SIGTERM):
            return self._job_ended()
        timeout_s = self.config.checkpoint_wait_s if wait_s is None else wait_s
        return poll_until(self._job_ended, timeout_s=timeout_s, interval_s=0.1)

    def upload(self) -> list[str]:
        """Push the checkpoints and the final files to the durable store."""
        if self.store is None:
            return []
        cfg = self.config
        try:
            uploaded = self.store.upload(cfg.run_dir, cfg.run_id, self._own_id(), FINAL_FILES)
        except (SpotrunError, OSError) as exc:
            log.error("upload to %s failed: %s: %s", self.store.where, type(exc).__name__, exc)
            return []
        log.info("uploaded %s", ", ".join(uploaded) or "nothing new")
        return uploaded

    def _exit_code(self) -> int | None:
        try:
            code = json.loads(self._file(EXIT_FILE).read_text()).get("exit_code")
        except (OSError, ValueError, AttributeError):
            return None
        return code if isinstance(code, int) else None

    def record_ending(self, ending: Ending) -> None:
        """self-terminated.json: why this instance ends (written before the job is stopped, so
        that a controller's sync brings the reason with the job's exit record)."""
        write_json_atomic(
            self._file(SELF_TERMINATED_FILE),
            {
                "why": ending.why,
                "reason": ending.reason,
                "at": time.time(),
                "instance_id": self._own_id(),
                "exit_code": self._exit_code(),
            },
        )

    def terminate_self(self, ending: Ending) -> bool:
        """Record why, upload, then end this instance's billing; False if EC2 refused."""
        reason = ending.reason
        self.record_ending(ending)
        self.upload()
        instance_id = self._own_id()
        if not self.config.terminate or instance_id is None or self.terminator is None:
            log.warning("would terminate %s (%s); not allowed to", instance_id, reason)
            return True
        log.info("terminating own instance %s: %s", instance_id, reason)
        try:
            self.terminator.terminate(instance_id)
        except (SpotrunError, MetadataError) as exc:
            log.error("could not terminate %s (tried again next round): %s", instance_id, exc)
            return False
        return True

    # ---------------------------------------------------------------- checks
    def check_metadata(self) -> None:
        try:
            action = self.imds.get(ACTION_PATH)
            rebalance = None if self._rebalanced else self.imds.get(REBALANCE_PATH)
        except MetadataError as exc:
            log.warning("%s", exc)
            return
        if rebalance and not self._rebalanced:
            self._rebalanced = True
            write_json_atomic(
                self._file(REBALANCE_FILE),
                {"seen_at": time.time(), "instance_id": self._own_id(), "raw": rebalance},
            )
            log.info("rebalance recommendation: %s", rebalance)
        if action and not self._noticed:
            self._noticed = True
            self.on_notice(action)

    def on_notice(self, raw: str) -> None:
        try:
            detail = json.loads(raw)
        except ValueError:
            detail = {"raw": raw}
        seen_at = time.time()
        acts_at = notice_time(detail.get("time"))
        # EC2's time and this instance's clock share a frame; the controller's clock may not,
        # so it is told the seconds left ("left_s"), never asked to compare the two clocks.
        left_s = None if acts_at is None else acts_at - seen_at
        notice: dict[str, object] = {
            "kind": "interruption",
            "instance_id": self._own_id(),
            "action": detail.get("action"),
            "time": detail.get("time"),
            "seen_at": seen_at,
            "left_s": left_s,
        }
        write_json_atomic(self._file(NOTICE_FILE), notice)  # first, so the controller acts now
        log.info("spot interruption notice: %s", raw)
        window_s = self.checkpoint_window(left_s)
        log.info("the job has %.1f s to checkpoint before the upload", window_s)
        notice["checkpointed"] = self.stop_job("spot interruption notice", window_s)
        notice["uploaded"] = self.upload()
        notice["stored_at"] = time.time()
        write_json_atomic(self._file(NOTICE_FILE), notice)
        self.upload()  # notice.json again, now saying what is stored

    def checkpoint_window(self, left_s: float | None) -> float:
        """How long the job may take to checkpoint after a notice with `left_s` seconds left
        (None: the notice had no readable time): what is left less the upload's margin, and at
        least half of what is left (a short notice still gives the job a chance to save)."""
        if left_s is None:
            return self.config.checkpoint_wait_s
        return max(0.0, left_s - self.config.upload_margin_s, left_s / 2)

    def last_progress(self) -> float:
        """When the job last moved (its newest progress file), at the earliest our start."""
        newest = self.started
        for name in PROGRESS_FILES:
            try:
                newest = max(newest, self._file(name).stat().st_mtime)
            except OSError:
                continue
        return newest

    def check_lifetime(self, now: float) -> Ending | None:
        """Why this instance should end itself now, if it should. A silent controller is no
        reason: the job goes on while it makes progress, and a controller picks it up later."""
        cfg = self.config
        running_s = time.monotonic() - self._started_monotonic
        past_deadline_in = cfg.deadline_in_s is not None and running_s >= cfg.deadline_in_s
        if past_deadline_in or (cfg.deadline is not None and now >= cfg.deadline):
            return Ending(DEADLINE, "the run's max-hours or budget cap was reached")
        if self._job_ended():
            self._ended_at = self._ended_at or now
            if now - self._ended_at >= cfg.end_grace_s:
                return Ending(
                    JOB_ENDED,
                    f"the job ended {cfg.end_grace_s:.0f} s ago and no controller collected it",
                )
            return None
        self._ended_at = None  # started again (a multi-node run's survivor rejoins)
        idle = now - self.last_progress()
        if cfg.no_progress_s > 0 and idle >= cfg.no_progress_s:
            return Ending(
                NO_PROGRESS,
                f"the job made no progress for {idle:.0f} s (its log, metrics, data staging "
                f"and checkpoints unchanged; run.no_progress_s is {cfg.no_progress_s:.0f})",
            )
        return None

    def step(self) -> bool:
        """One round of checks; False once the instance is ending."""
        if not self._noticed:
            self.check_metadata()
        if self._noticed:
            return True  # EC2 ends the instance; the controller has the notice
        ending = self.check_lifetime(time.time())
        if ending is None:
            return True
        self.record_ending(ending)
        self.stop_job(ending.reason)
        return not self.terminate_self(ending)

    def run(self) -> int:
        log.info("watching run %s (metadata %s)", self.config.run_id, self.config.metadata_url)
        repeat(self.step, interval_s=self.config.poll_s)
        return 0


def argument_parser(prog: str) -> argparse.ArgumentParser:
    """The watcher's own options; the cloud's entry point adds those of its parts."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--metadata-url", help="default: aws.metadata_url of this machine")
    parser.add_argument("--poll", type=float, default=5.0)
    parser.add_argument(
        "--no-progress", type=float, default=3600.0, help="seconds of no progress; 0 = never"
    )
    parser.add_argument(
        "--deadline-in", type=float, default=None, help="seconds from now to the cap"
    )
    # An older controller's way to say it: an absolute time on its own clock.
    parser.add_argument("--deadline", type=float, default=None, help="unix time of the cap")
    parser.add_argument("--end-grace", type=float, default=300.0)
    parser.add_argument("--no-terminate", action="store_true")
    return parser


def config_from(args: argparse.Namespace, metadata_url: str) -> WatchConfig:
    """The WatchConfig of parsed options, with the metadata service's URL (the entry point
    takes it from --metadata-url, or from the machine's settings); logging set up."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s watcher: %(message)s", stream=sys.stdout
    )
    return WatchConfig(
        run_dir=args.run_dir,
        run_id=args.run_id,
        metadata_url=metadata_url,
        poll_s=args.poll,
        no_progress_s=args.no_progress,
        deadline_in_s=args.deadline_in,
        deadline=args.deadline,
        end_grace_s=args.end_grace,
        terminate=not args.no_terminate,
    )
