"""How often a running job is polled when one process drives many runs.

A poll of a running job costs its controller about a millisecond of CPU (one SSH command,
spotrun.remote.probe, and the ledger's record of its newest metrics), so a controller that
polled 100 runs every second would spend ~15% of a core on it. Each run is polled every
`poll_s` of its cloud while few runs are watched; as more are, the interval widens so that the
process makes at most `polls_per_s` polls a second, and never beyond `max_s`, so that a metric
written on an instance still reaches the ledger within about 5 s however many runs there are.
The one controller of a SPOTRUN_HOME shares PROCESS_PACE among all its runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

POLLS_PER_S = 50.0  # the most polls of running jobs one process makes a second
MAX_POLL_S = 4.0  # the widest interval: a metric reaches the ledger within ~5 s


class PollPace:
    def __init__(self, polls_per_s: float = POLLS_PER_S, max_s: float = MAX_POLL_S) -> None:
        self.polls_per_s = polls_per_s
        self.max_s = max_s
        self._watched = 0
        self._lock = threading.Lock()

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Count one more running job polled while the block runs."""
        with self._lock:
            self._watched += 1
        try:
            yield
        finally:
            with self._lock:
                self._watched -= 1

    @property
    def watched(self) -> int:
        return self._watched

    def interval(self, poll_s: float) -> float:
        """The interval between polls of one run whose own is `poll_s`."""
        return max(poll_s, min(self._watched / self.polls_per_s, self.max_s))


PROCESS_PACE = PollPace()
