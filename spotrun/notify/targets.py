"""Notification targets as the user writes them, checked, and masked for every display.

slack:https://hooks.slack.com/services/...   a Slack-compatible webhook (JSON {"text": ...})
ntfy:https://ntfy.sh/TOPIC                   ntfy (plain text, a Title header)
webhook:https://example.com/hook             a JSON object (run, event, state, reason, ...)
smtp://user:pass@host:587/?to=a@b&from=c@d   email; smtp+starttls:// upgrades with STARTTLS,
                                             smtps:// is TLS from the first byte
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from spotrun.core.errors import UsageError

TargetKind = Literal["slack", "ntfy", "webhook", "smtp"]
HTTP_KINDS: tuple[TargetKind, ...] = ("slack", "ntfy", "webhook")
SMTP_SCHEMES = ("smtp", "smtp+starttls", "smtps")

# What a run or sweep can tell; "pruned" (a sweep's trial stopped early) only when asked for.
EVENTS = (
    "succeeded",
    "failed",
    "stopped",
    "budget",
    "max-hours",
    "interrupted",
    "recovered",
    "waiting",
    "sweep-finished",
    "pruned",
)
DEFAULT_EVENTS = tuple(e for e in EVENTS if e != "pruned")

EXAMPLES = "slack:URL, ntfy:URL, webhook:URL or smtp://user:pass@host:port/?to=you@example.com"


class NotifyTargetError(UsageError):
    """A --notify target (or config.toml's notify entry) that spotrun cannot send to."""


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    text: str  # as the user wrote it: the secret itself, kept only in the target file

    @property
    def id(self) -> str:
        """Stable for one target, so that giving it again reuses its entry."""
        return "nt" + hashlib.sha256(self.text.encode()).hexdigest()[:10]

    @property
    def url(self) -> str:
        """The address posted to (http kinds) or the smtp URL."""
        return self.text if self.kind == "smtp" else self.text.split(":", 1)[1]

    @property
    def masked(self) -> str:
        return mask(self.text)


def parse_target(text: str) -> Target:
    """The target `text` names, or a one-line NotifyTargetError saying why it is not one."""
    text = text.strip()
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme in SMTP_SCHEMES:
        _check_smtp(text)
        return Target("smtp", text)
    if scheme in HTTP_KINDS:
        _check_http(text.split(":", 1)[1], scheme)
        return Target(scheme, text)
    raise NotifyTargetError(f"{mask(text)!r} is not a notification target", hint=EXAMPLES)


def parse_targets(texts: list[str]) -> list[Target]:
    targets = [parse_target(t) for t in texts]
    return list({t.id: t for t in targets}.values())  # each once


def parse_events(texts: list[str]) -> tuple[str, ...]:
    """--notify-on (or config's notify_on): comma lists of event names."""
    names = [n.strip() for text in texts for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in EVENTS]
    if unknown:
        raise NotifyTargetError(
            f"--notify-on {unknown[0]!r} is not an event", hint=f"give any of {', '.join(EVENTS)}"
        )
    return tuple(dict.fromkeys(names)) or DEFAULT_EVENTS


def _check_http(url: str, kind: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise NotifyTargetError(f"{kind}: {mask(url)!r} is not a URL", hint=EXAMPLES) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotifyTargetError(
            f"{kind}: needs an http(s) URL, e.g. {kind}:https://host/path (got {mask(url)!r})"
        )
    if kind == "ntfy" and not parts.path.strip("/"):
        raise NotifyTargetError("ntfy: the URL needs a topic, e.g. ntfy:https://ntfy.sh/my-runs")


def _check_smtp(text: str) -> None:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise NotifyTargetError(f"{mask(text)!r} is not an smtp URL", hint=EXAMPLES) from None
    if not parts.hostname:
        raise NotifyTargetError(f"{mask(text)!r} names no mail server", hint=EXAMPLES)
    query = parse_qs(parts.query)
    to = query.get("to", [])
    if not to or not all("@" in a for a in ",".join(to).split(",")):
        raise NotifyTargetError(
            f"{mask(text)!r} needs ?to=ADDRESS (who gets the email)", hint=EXAMPLES
        )
    if parts.password is not None and not parts.username:
        raise NotifyTargetError(f"{mask(text)!r} has a password but no user")


def mask(text: str) -> str:
    """`text` with its secrets hidden: a URL's password, and all but the start of its path and
    query (a webhook's path is its key; an ntfy topic is readable by whoever knows it)."""
    kind, sep, rest = text.partition(":")
    if sep and kind.lower() in HTTP_KINDS:
        return f"{kind}:{mask(rest)}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text[:8] + "…" if len(text) > 8 else "…"
    if not parts.scheme or not parts.hostname:
        return text[:8] + "…" if len(text) > 8 else "…"
    user = ""
    if parts.username:
        user = parts.username + (":***" if parts.password is not None else "") + "@"
    host = parts.hostname + (f":{port}" if port is not None else "")
    shown = f"{parts.scheme}://{user}{host}"
    if parts.scheme.lower() in SMTP_SCHEMES:  # the path means nothing; the query is addresses
        return shown + (f"/?{parts.query}" if parts.query else "")
    return shown + _mask_path(parts.path) + ("?…" if parts.query else "")


def _mask_path(path: str) -> str:
    segments = [s for s in path.split("/") if s]
    if not segments:
        return path
    kept = segments[:1] if len(segments) > 1 else []
    hidden = segments[len(kept) :]
    first = hidden[0][:2] + "…"
    return "/" + "/".join([*kept, first, *("…" for _ in hidden[1:])])
