"""The processes that drive runs: the home's one controller, a run's supervisor
(`controller = "per-run"`: the same code limited to one run), starting and restarting them
(revive), the locks that say they are alive, the setup every such process shares.

Above sweep/ and control/: a driving process resolves a run's provider (a packed sweep trial's
is its share of the pack) and drives sweeps as well as runs. Nothing below imports it.
"""
