"""Sending one message to one target, with short timeouts (the controller's worker must never
wait long on the network). Every error is a DeliveryError whose text has the target masked."""

from __future__ import annotations

import json
import smtplib
import ssl
import urllib.error
import urllib.request
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from spotrun.core.errors import SpotrunError
from spotrun.core.money import show_usd
from spotrun.notify.targets import Target, mask

TIMEOUT_S = 5.0
USER_AGENT = "spotrun-notify"


class DeliveryError(SpotrunError):
    """A target did not take a message (down, refused, timed out): it is tried again later."""


def title(fields: dict[str, Any]) -> str:
    return f"spotrun: {fields['subject']} {fields['summary']}"


def text(fields: dict[str, Any]) -> str:
    lines = [title(fields)]
    if fields.get("reason"):
        lines.append(f"reason: {fields['reason']}")
    if fields.get("cost") is not None:
        lines.append(f"cost so far: {show_usd(fields['cost'])}")
    return "\n".join(lines)


def webhook_body(fields: dict[str, Any]) -> dict[str, Any]:
    """The generic webhook's JSON object."""
    keys = ("run", "sweep", "event", "state", "reason", "cost", "url")
    return {key: fields.get(key) for key in keys} | {"text": text(fields)}


def send(target: Target, fields: dict[str, Any]) -> None:
    """Deliver one message, or raise DeliveryError (its text masked)."""
    try:
        if target.kind == "smtp":
            _send_email(target, fields)
        elif target.kind == "slack":
            _post(target, json.dumps({"text": text(fields)}).encode(), "application/json", {})
        elif target.kind == "ntfy":
            headers = {"Title": title(fields)}
            _post(target, text(fields).encode(), "text/plain; charset=utf-8", headers)
        else:
            body = json.dumps(webhook_body(fields)).encode()
            _post(target, body, "application/json", {})
    except DeliveryError:
        raise
    except (OSError, smtplib.SMTPException, ValueError) as exc:
        raise DeliveryError(hide(target, f"{type(exc).__name__}: {exc}")) from None


def hide(target: Target, message: str) -> str:
    """`message` with every secret part of `target` masked."""
    secrets = [target.text, target.url]
    parts = urlsplit(target.url)
    if parts.password:
        secrets += [parts.password, unquote(parts.password)]
    if parts.path.strip("/"):
        secrets.append(parts.path)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            message = message.replace(secret, mask(secret) if "://" in secret else "…")
    return message


def _post(target: Target, body: bytes, content_type: str, headers: dict[str, str]) -> None:
    request = urllib.request.Request(
        target.url,
        data=body,
        method="POST",
        headers={"Content-Type": content_type, "User-Agent": USER_AGENT, **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            answer.read(1024)
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"{target.masked} answered HTTP {exc.code} {exc.reason}") from None


def _send_email(target: Target, fields: dict[str, Any]) -> None:
    parts = urlsplit(target.url)
    query = parse_qs(parts.query)
    to = [a.strip() for a in ",".join(query["to"]).split(",") if a.strip()]
    sender = query.get("from", [f"spotrun@{parts.hostname}"])[0]
    email = EmailMessage()
    email["Subject"] = title(fields)
    email["From"] = sender
    email["To"] = ", ".join(to)
    email.set_content(text(fields) + "\n")
    host = parts.hostname or ""
    scheme = parts.scheme.lower()
    smtp: smtplib.SMTP
    if scheme == "smtps":
        smtp = smtplib.SMTP_SSL(
            host, parts.port or 465, timeout=TIMEOUT_S, context=ssl.create_default_context()
        )
    else:
        smtp = smtplib.SMTP(host, parts.port or 25, timeout=TIMEOUT_S)
    with smtp:
        if scheme == "smtp+starttls":
            smtp.starttls(context=ssl.create_default_context())
        if parts.username:
            smtp.login(unquote(parts.username), unquote(parts.password or ""))
        smtp.send_message(email, from_addr=sender, to_addrs=to)
