"""Notifications' pure parts: targets checked and masked, backoff, which move is which news."""

from __future__ import annotations

import pytest

from spotrun.core.errors import UsageError
from spotrun.core.runstates import RunState
from spotrun.notify import backoff
from spotrun.notify.announce import run_event
from spotrun.notify.senders import hide
from spotrun.notify.targets import DEFAULT_EVENTS, parse_events, parse_target


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "slack:https://hooks.slack.com/services/T0ABCDEF/B0123/SeCrEtToKeN",
            "slack:https://hooks.slack.com/services/T0…/…/…",
        ),
        ("ntfy:https://ntfy.sh/my-private-topic", "ntfy:https://ntfy.sh/my…"),
        ("webhook:https://example.com/hook/k3y?sig=abc", "webhook:https://example.com/hook/k3…?…"),
        (
            "smtp+starttls://me:hunter2@mail.example.com:587/?to=a@b.c",
            "smtp+starttls://me:***@mail.example.com:587/?to=a@b.c",
        ),
    ],
)
def test_targets_are_masked(text: str, shown: str) -> None:
    target = parse_target(text)
    assert target.masked == shown
    assert target.id == parse_target(text).id  # stable: the same target, the same entry


@pytest.mark.parametrize(
    "text",
    [
        "https://hooks.slack.com/x",  # no kind
        "slack:ftp://host/x",
        "ntfy:https://ntfy.sh/",  # no topic
        "smtp://me:pw@host:25/",  # nobody to send to
        "smtp://me:pw@host:port/?to=a@b",
        "webhook:not a url",
    ],
)
def test_bad_targets_are_one_line_errors_without_the_secret(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_target(text)
    message = caught.value.user_message()
    assert "\n" not in message
    assert "pw@" not in message


def test_events_default_leaves_pruned_out_and_unknown_is_refused() -> None:
    assert "pruned" not in DEFAULT_EVENTS and parse_events([]) == DEFAULT_EVENTS
    assert parse_events(["failed,pruned", "failed"]) == ("failed", "pruned")
    with pytest.raises(UsageError, match="not an event"):
        parse_events(["finished"])


def test_backoff_doubles_to_a_cap_and_gives_up_after_a_day() -> None:
    assert [backoff.pause_s(n, 10.0) for n in (1, 2, 3, 4)] == [10.0, 20.0, 40.0, 80.0]
    assert backoff.pause_s(30, 10.0) == backoff.MAX_PAUSE_S
    assert backoff.pause_s(10_000, 10.0) == backoff.MAX_PAUSE_S  # no overflow
    assert backoff.next_try_at(0.0, 100.0, 1, 10.0) == 110.0
    assert backoff.next_try_at(0.0, backoff.GIVE_UP_S - 5.0, 1, 10.0) is None


def test_error_text_has_the_secrets_masked() -> None:
    target = parse_target("smtp://me:hunter2@127.0.0.1:1/?to=a@b.c")
    hidden = hide(target, "login as me:hunter2 to smtp://me:hunter2@127.0.0.1:1/?to=a@b.c failed")
    assert "hunter2" not in hidden
    hook = parse_target("slack:http://127.0.0.1:1/services/T0/B1/tok3n")
    assert "tok3n" not in hide(hook, "<urlopen error http://127.0.0.1:1/services/T0/B1/tok3n>")


class _Run:
    def __init__(self, state: RunState) -> None:
        self.state = state


@pytest.mark.parametrize(
    ("state", "reason", "earlier", "event"),
    [
        (RunState.SUCCEEDED, "job exited with code 0", [RunState.SYNCING], "succeeded"),
        (RunState.FAILED, "job exited with code 3", [RunState.SYNCING], "failed"),
        (RunState.STOPPED, "budget: $1.00 cap; ...", [RunState.RUNNING], "budget"),
        (RunState.STOPPED, "max-hours: its 1h cap is reached", [RunState.RUNNING], "max-hours"),
        (RunState.STOPPED, "stopped by the user", [RunState.RUNNING], "stopped"),
        (RunState.INTERRUPTED, "spot notice", [RunState.RUNNING], "interrupted"),
        (RunState.RUNNING, "job running", [RunState.RUNNING, RunState.INTERRUPTED], "recovered"),
        (RunState.RUNNING, "job running", [RunState.BOOTSTRAPPING], None),
        (
            RunState.RUNNING,
            "job running",
            [RunState.INTERRUPTED, RunState.RUNNING, RunState.SYNCING],
            None,
        ),
        (RunState.PROVISIONING, "g5.xlarge", [RunState.REQUESTED], None),
    ],
)
def test_which_move_is_which_news(
    state: RunState, reason: str, earlier: list[RunState], event: str | None
) -> None:
    assert run_event(_Run(state), reason, earlier) == event  # type: ignore[arg-type]
