"""`--notify` and `--notify-on` on launch and sweep, and `spotrun notify test|ls`.

Targets are checked before anything is launched; a launch keeps them (secrets and all) in
SPOTRUN_HOME's 0600 target file and tells the ledger who is told of which run or sweep.
Everything shown masks them (spotrun.notify.targets.mask)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from spotrun.cli.lazy import lazy_module
from spotrun.cli.library import load_settings
from spotrun.cli.render import Table, iso_minute, out, print_json
from spotrun.cli.typer_app import SpotrunTyper
from spotrun.notify.targets import (
    EVENTS,
    NotifyTargetError,
    Target,
    parse_events,
    parse_targets,
)

if TYPE_CHECKING:
    from spotrun.notify import queue, senders, target_file
    from spotrun.service import runs as api
    from spotrun.store.ledger import Ledger
else:  # the ledger's modules load when a command uses them, not with the CLI
    queue = lazy_module("spotrun.notify.queue")
    senders = lazy_module("spotrun.notify.senders")
    target_file = lazy_module("spotrun.notify.target_file")
    api = lazy_module("spotrun.service.runs")

NOTIFY_ON_HELP = f"which news, comma separated: {', '.join(EVENTS)} (default: all but pruned)"


def notify_option() -> Any:
    return typer.Option(
        [],
        "--notify",
        metavar="TARGET",
        help="tell TARGET of the news: slack:URL, ntfy:URL, webhook:URL or "
        "smtp://user:pass@host:port/?to=ADDRESS (repeat for more; default: config's notify)",
    )


def notify_on_option() -> Any:
    return typer.Option([], "--notify-on", metavar="EVENTS", help=NOTIFY_ON_HELP)


class Notices:
    """The targets and events a launch or sweep asked for, checked before anything exists."""

    def __init__(self, targets: list[Target], events: tuple[str, ...]) -> None:
        self.targets, self.events = targets, events

    @classmethod
    def read(cls, settings: Any, notify: list[str], notify_on: list[str]) -> Notices:
        """--notify (else config's notify) and --notify-on (else config's notify_on); a bad
        one is a one-line UsageError."""
        try:
            targets = parse_targets(notify or list(settings.notify))
            events = parse_events(notify_on or list(settings.notify_on))
        except NotifyTargetError as exc:
            from_config = (not notify and settings.notify) or (not notify_on and settings.notify_on)
            if not from_config:
                raise
            where = f"{exc.message} (from {settings.config_path})"  # not a flag: say where
            raise NotifyTargetError(where, hint=exc.hint) from None
        return cls(targets, events)

    def subscribe(self, ledger: Ledger, subject_id: str) -> None:
        """Keep the targets and tell the ledger who is told of `subject_id` (a run or sweep
        id): done before the run or sweep starts, so its first news is not missed."""
        if not self.targets:
            return
        target_file.save_targets(ledger.home, self.targets)
        queue.subscribe(ledger, subject_id, self.targets, self.events)

    def forget_unlaunched(self, ledger: Ledger, run_id: str) -> None:
        """A launch that recorded no run leaves no subscription."""
        if self.targets and api.find_run(ledger, run_id) is None:
            queue.unsubscribe_all(ledger, run_id)


notify_app = SpotrunTyper(
    help="Notifications: send a test message to a target; list what was sent and tried.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@notify_app.command("test")
def notify_test(
    target: str = typer.Argument(..., metavar="TARGET", help="as --notify takes it"),
) -> None:
    """Send one test message to TARGET now, and say whether it arrived.

    \b
    Examples:
      spotrun notify test ntfy:https://ntfy.sh/my-training-runs
      spotrun notify test 'smtp+starttls://me:PASSWORD@smtp.example.com:587/?to=me@example.com'
    """
    (parsed,) = parse_targets([target])
    fields = {
        "subject": "notify test",
        "summary": "from spotrun: this target works",
        "event": "test",
        "state": None,
        "reason": None,
    }
    senders.send(parsed, fields)  # a DeliveryError is the one-line error, masked
    out.print(f"sent a test message to {parsed.masked}", markup=False)


@notify_app.command("ls")
def notify_ls(
    as_json: bool = typer.Option(False, "--json", help="messages and their attempts as JSON"),
) -> None:
    """The newest notifications: queued, sent or given up, with their attempts.

    \b
    Examples:
      spotrun notify ls           # one line each: event, target (masked), state, tries
      spotrun notify ls --json    # every attempt with its time and (masked) error
    """
    ledger = api.open_ledger(load_settings())
    rows: list[dict[str, Any]] = []
    for message in queue.messages(ledger):
        tries = queue.attempts(ledger, message.id)
        rows.append(
            {
                "id": message.id,
                "subject": message.fields.get("subject"),
                "event": message.event,
                "target": message.target_label,
                "state": message.state,
                "queued_at": message.created_at,
                "sent_at": message.sent_at,
                "attempts": [{"at": t.at, "outcome": t.outcome, "error": t.error} for t in tries],
            }
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no notifications", markup=False)
        return
    table = Table(box=None)
    for column in ("id", "subject", "event", "target", "state", "tries", "last error"):
        table.add_column(column)
    for row in rows:
        errors = [a["error"] for a in row["attempts"] if a["error"]]
        table.add_row(
            str(row["id"]),
            str(row["subject"]),
            row["event"],
            row["target"],
            row["state"] + (f" {iso_minute(row['sent_at'])}" if row["sent_at"] is not None else ""),
            str(len(row["attempts"])),
            errors[-1] if errors else "",
        )
    out.print(table)
