"""Exit codes with a meaning across processes (trainer, job wrapper, controller)."""

SUCCESS = 0
FAILURE = 1
USAGE = 2
# The trainer saved a checkpoint because it was asked to stop (SIGTERM/SIGUSR1, a spot notice)
# and exited; running the same command again on the same run folder resumes from it.
CHECKPOINTED = 75
