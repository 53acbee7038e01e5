"""The lab set up for a controller living on its own lab instance: fast lab timings, and the
laptop side's shared SSH connection to that controller closed at the end, whatever happened."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.fixtures import use_lab
from spotrun.remote_controller.connection import close_shared_connection
from spotrun.remote_controller.record import load_record
from tests.conftest import Env


@contextmanager
def controller_lab(env: Env, lab: Lab) -> Iterator[None]:
    with use_lab(env, lab, **spotlab.FAST):
        try:
            yield
        finally:
            record = load_record(env.home)
            if record is not None:
                close_shared_connection(env.home, record)
