"""pytest fixtures for the lab.

`lab`: a started Lab (its own VPC, hosts, bucket, prices) on the test process's moto server,
closed after the test (every instance terminated, every host killed).
`make_lab(**options)`: more labs, or labs with other options (`boot="silent"`, `bucket=False`).
`aws_env`: the conftest `Env` (the real CLI in child processes) pointed at `lab`: AWS variables
set and SPOTRUN_HOME/config.toml written with the lab's [aws] settings; `use_lab(env, lab,
**settings)` does the same for another lab or other settings.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from spotlab.harness import Env
from spotlab.lab import Lab


def lab_root() -> Path:
    # Host folders hold unix sockets (tmux), whose paths must stay short: not under tmp_path.
    return Path(tempfile.mkdtemp(prefix="sr-lab-", dir="/tmp"))


@pytest.fixture
def make_lab() -> Iterator[Callable[..., Lab]]:
    made: list[tuple[Lab, Path]] = []

    def make(**options: Any) -> Lab:
        root = lab_root()
        started = Lab(root, **options).start()
        made.append((started, root))
        return started

    yield make
    errors = []
    for started, root in made:
        started.close()
        errors += started.errors
        # A call IAM refused is a permission missing from the README's policies (or a call
        # spotrun should not make): a test that provokes one on purpose clears the list.
        errors += [f"IAM refused {denied}" for denied in started.front.iam.denied]
        shutil.rmtree(root, ignore_errors=True)
    assert not errors, f"the lab's watcher failed: {errors}"


@pytest.fixture
def lab(make_lab: Callable[..., Lab]) -> Lab:
    return make_lab()


@contextmanager
def use_lab(env: Env, lab: Lab, **settings: Any) -> Iterator[Env]:
    """Point `env` (child processes) and this process at `lab`, with these [aws] settings."""
    env.vars.update(lab.config.env())
    lab.config.write_config(env.home, **settings)
    with lab.config.environ():
        yield env


@pytest.fixture
def aws_env(env: Env, lab: Lab) -> Iterator[Env]:
    with ExitStack() as stack:
        yield stack.enter_context(use_lab(env, lab))
