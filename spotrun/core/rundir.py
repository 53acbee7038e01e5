"""The run folder's contract: the name of every file and folder in it, and of every SPOTRUN_*
environment variable. The one place these names are written (tests/unit/core/
test_rundir_contract.py fails on a copy of one anywhere else in spotrun/).

A run folder (RUN_DIR) is the same on the instance and on this machine: the job writes it,
sync and the durable store copy it. Names: `*_FILE` a file, `*_DIR` a folder, `*_VAR` an
environment variable. Pure names, no I/O: `spotrun --help` reads SPOTRUN_HOME's name from here.
Whether a checkpoint is whole: spotrun.core.checkpoint_files.
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------ the job (agent.wrapper)
JOB_FILE = "job.json"  # what the wrapper runs: argv, cwd, the job's options
# The job's environment on its machine: a file only the job's user can read (0600), never an
# argv (the agent's, tmux's): values such as API keys must not be readable in /proc by every
# user. A dot file: the run-folder sync leaves it on the instance.
JOB_ENV_FILE = ".job-env.json"
JOB_LOG_FILE = "job.log"  # the job's output
EXIT_FILE = "exit.json"  # written by the wrapper when the job ends: its code and phase
SETUP_SCRIPT_FILE = "setup.sh"  # your own command's setup, run once per instance
SETUP_LOG_FILE = "setup.log"  # its output
SETUP_DONE_FILE = ".setup-done"  # the setup ran on this instance: not again
DATA_PATH_FILE = "data-path"  # where `spotrun agent stage` put the job's data set
WORKDIR_DIR = "workdir"  # your workdir as pushed (the job runs there); outputs come from it
PUSH_MANIFEST_FILE = ".push-manifest.json"  # what a push sent (a dot file: syncs leave it)
EXEC_DIR = "exec"  # `spotrun exec`: each window's output (<window>.log) and exit code (.exit)
EXEC_WINDOW_PREFIX = "exec-"  # the windows are exec-1, exec-2, ...

# ------------------------------------------------------------ the watcher (agent.watcher)
NOTICE_FILE = "notice.json"  # a spot interruption notice the instance received
REBALANCE_FILE = "rebalance.json"  # a rebalance recommendation
SELF_TERMINATED_FILE = "self-terminated.json"  # why the watcher ended its own instance
WATCHER_PID_FILE = "watcher.pid"
WATCHER_LOG_FILE = "watcher.log"
# The checkpoint uploader (spotrun.cloud.aws.checkpoints, started by cloud.aws.uploader).
UPLOADER_PID_FILE = "store.pid"
UPLOADER_LOG_FILE = "store.log"
DURABLE_STATE_FILE = ".store.json"  # what has been uploaded to the durable store

# ------------------------------------------------------------------ training (train.*)
CHECKPOINTS_DIR = "checkpoints"  # synced, stored durably, restored on a replacement instance
# A checkpoint: CHECKPOINTS_DIR/ckpt-<step, 9 digits>.pt, a torch zip archive.
CHECKPOINT_NAME = re.compile(r"ckpt-(\d{9})\.pt")
CHECKPOINT_RESTORE_DIR = ".checkpoints-restore"  # the push state of restored checkpoints
METRICS_FILE = "metrics.jsonl"  # one JSON line per evaluation, written by the trainer
# Where training is inside its epoch (spotrun.train.progress writes it, followers read it).
PROGRESS_FILE = "progress.json"
RECIPE_FILE = "recipe.json"  # the recipe the trainer ran, resolved
TRACE_FILE = "trace.json"  # the engine's trace summary
DEVICE_FILE = "device.json"  # the device trained on, and what `auto` chose there
# A char-level text run's vocabulary (its sorted characters), for `spotrun sample`.
VOCABULARY_FILE = "vocabulary.json"
# TensorBoard event files, written beside metrics.jsonl (spotrun.train.curves) so that
# `tensorboard --logdir SPOTRUN_HOME/runs` shows every run; TensorBoard finds them by this part
# of the name. They only grow, so sync appends to them like metrics.jsonl.
EVENT_FILE_MARK = ".tfevents."

# ------------------------------------------------------------- data (spotrun.datasets)
STAGING_FILE = "staging.json"  # the staging of remote data, as it goes
STAGING_HISTORY_FILE = "staging-history.json"  # every staging the run did, for its summary

# ----------------------------------------------------- this machine's copy (spotrun.control)
SUPERVISOR_LOCK_FILE = "supervisor.lock"  # held by the run's supervisor (a sweep's: likewise)
SUPERVISOR_LOG_FILE = "supervisor.log"  # its output (never synced over the instance's copy)
# A sweep folder's search study (Optuna's journal): what its sampler was told, kept across
# controller restarts.
SWEEP_STUDY_FILE = "study.journal"
SYNC_STATE_FILE = ".sync.json"  # what sync has fetched, so each sync fetches only what changed
CLUSTER_LAYOUT_FILE = "cluster.json"  # a multi-node run: its nodes at the last start
NODES_DIR = "nodes"  # what nodes other than node 0 sync back, one folder each

# ----------------------------------------------------------------- environment variables
HOME_VAR = "SPOTRUN_HOME"  # where spotrun keeps its state (spotrun.core.home)
RESERVED_VAR_PREFIX = "SPOTRUN_"  # the job's --env may not set these: spotrun does
# What every job is told (spotrun.remote.jobprep, control.controller).
RUN_ID_VAR = "SPOTRUN_RUN_ID"
RUN_DIR_VAR = "SPOTRUN_RUN_DIR"
CHECKPOINT_DIR_VAR = "SPOTRUN_CHECKPOINT_DIR"
NUM_GPUS_VAR = "SPOTRUN_NUM_GPUS"
# The training threads the placement chose for the job (the local cloud: one per free core);
# when set, the trainer uses it instead of the recipe's `threads` (spotrun.train.build).
THREADS_VAR = "SPOTRUN_THREADS"
# A multi-node run's node (spotrun.control.cluster): its rank, the count, node 0's address, and
# the torchrun rendezvous arguments.
NODE_RANK_VAR = "SPOTRUN_NODE_RANK"
NNODES_VAR = "SPOTRUN_NNODES"
MASTER_ADDR_VAR = "SPOTRUN_MASTER_ADDR"
TORCHRUN_ARGS_VAR = "SPOTRUN_TORCHRUN_ARGS"
# The job's data set (spotrun.datasets): where it was staged, and how.
DATA_DIR_VAR = "SPOTRUN_DATA_DIR"
STAGE_ROOT_VAR = "SPOTRUN_STAGE_ROOT"  # stage here instead of the chosen volume
STAGE_STREAMS_VAR = "SPOTRUN_STAGE_STREAMS"  # parallel downloads while staging
STAGE_RESERVE_BYTES_VAR = "SPOTRUN_STAGE_RESERVE_BYTES"  # free space staging leaves
DATA_VOLUME_VAR = "SPOTRUN_DATA_VOLUME"  # the snapshot volume's id, set by the controller
CACHE_VOLUME_VAR = "SPOTRUN_CACHE_VOLUME"  # the run's cache volume's id, likewise
DATA_COPY_VAR = "SPOTRUN_DATA_COPY"  # "1": the job copies the snapshot's data to local disk
# Set by the shell's completion function on Tab (spotrun.cli.complete).
COMPLETE_VAR = "_SPOTRUN_COMPLETE"


def checkpoint_file_name(step: int) -> str:
    """The checkpoint of training step `step`, as CHECKPOINT_NAME matches it."""
    return f"ckpt-{step:09d}.pt"


def is_event_file(name: str) -> bool:
    """Whether `name` (a path in the run folder) is a TensorBoard event file of the run."""
    return "/" not in name and EVENT_FILE_MARK in name
