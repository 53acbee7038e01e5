"""Notifications end to end on the local cloud (issue 33, item 3): the real CLI launches runs
with --notify (or config.toml's notify), the home's controller sends what they tell to real
servers on 127.0.0.1 (an HTTP server for Slack, ntfy and a webhook; aiosmtpd for email), a
target that is down is tried again until it answers, and no secret is shown or kept in the
clear anywhere but SPOTRUN_HOME's 0600 target file."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotlab import Lab
from spotlab import spot as spotlab
from spotlab.fixtures import use_lab
from spotlab.lab import ZONES
from spotrun.core.config import load_settings
from spotrun.notify import queue as notify_queue
from spotrun.store.ledger import Ledger
from tests.conftest import Env
from tests.helpers import wait_for
from tests.notify_receivers import HttpReceiver, SmtpReceiver, self_signed

pytestmark = pytest.mark.slow


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    server = HttpReceiver().start()
    yield server
    server.stop()


def _config(env: Env, text: str) -> None:
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "config.toml").write_text(text)


def _ledger_text(env: Env) -> str:
    """Every value the ledger holds (its WAL included), as text."""
    with sqlite3.connect(env.home / "ledger.db") as db:
        return "\n".join(db.iterdump())


def _notifications(env: Env) -> list[dict]:
    return json.loads(env.cli("notify", "ls", "--json", check=True).stdout)


def _failed_attempts(env: Env) -> int:
    """Failed sending attempts, read from the ledger here (waiting on them through the CLI
    cost a CPU-heavy process every 0.2 s)."""
    with Ledger(load_settings(env.home)) as ledger:
        return sum(
            a.outcome == "failed"
            for message in notify_queue.messages(ledger)
            for a in notify_queue.attempts(ledger, message.id)
        )


def test_slack_ntfy_and_webhook_hear_a_success_and_a_failure_and_no_secret_leaks(
    env: Env, receiver: HttpReceiver
) -> None:
    slack = receiver.url("/services/T0SLACKSECRET/B0/slack-token-1")
    ntfy = receiver.url("/ntfy-topic-secret")
    hook = receiver.url("/hook/webhook-key-secret")
    good = env.cli(
        "launch", "--cmd", "echo fine", "--notify", f"slack:{slack}",
        "--notify", f"ntfy:{ntfy}", "--notify", f"webhook:{hook}",
    )  # fmt: skip
    assert good.returncode == 0, good.stdout + good.stderr
    bad = env.cli("launch", "--cmd", "echo broken >&2; exit 3", "--notify", f"webhook:{hook}")
    assert bad.returncode != 0
    wait_for(lambda: len(receiver.posts) >= 4, 60, "four notifications")

    by_path = {}
    for post in receiver.posts:
        by_path.setdefault(post.path, []).append(post)
    (slack_post,) = by_path["/services/T0SLACKSECRET/B0/slack-token-1"]
    assert "succeeded" in json.loads(slack_post.body)["text"]
    (ntfy_post,) = by_path["/ntfy-topic-secret"]
    assert "succeeded" in ntfy_post.headers["Title"] and b"succeeded" in ntfy_post.body
    hook_bodies = [json.loads(p.body) for p in by_path["/hook/webhook-key-secret"]]
    assert {b["event"] for b in hook_bodies} == {"succeeded", "failed"}
    failed = next(b for b in hook_bodies if b["event"] == "failed")
    assert {"run", "event", "state", "reason", "cost", "url"} <= set(failed)
    assert failed["state"] == "failed" and "code 3" in failed["reason"]

    shown = good.stdout + good.stderr + bad.stdout + bad.stderr
    shown += env.cli("notify", "ls", check=True).stdout
    log = (env.home / "controller.log").read_text()
    for secret in ("SLACKSECRET", "slack-token-1", "ntfy-topic-secret", "webhook-key-secret"):
        assert secret not in shown
        assert secret not in log
        assert secret not in _ledger_text(env)
    kept = env.home / "notify-targets.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert "slack-token-1" in kept.read_text()


def test_email_over_smtp_from_config_tells_the_failure_and_its_reason(env: Env) -> None:
    smtp = SmtpReceiver("runner", "mail-pass-secret").start()
    try:
        _config(
            env,
            f'notify = ["smtp://runner:mail-pass-secret@127.0.0.1:{smtp.port}/'
            '?to=me@example.com&from=spotrun@example.com"]\n',
        )
        proc = env.cli("launch", "--cmd", "exit 4")
        assert proc.returncode != 0
        wait_for(lambda: smtp.emails, 60, "the email")
    finally:
        smtp.stop()
    (email,) = smtp.emails
    assert smtp.logins == ["runner"]
    assert "failed" in email["Subject"] and email["To"] == "me@example.com"
    assert "code 4" in email.get_payload()
    log = (env.home / "controller.log").read_text()
    for text in (proc.stdout + proc.stderr, log, _ledger_text(env)):
        assert "mail-pass-secret" not in text


def test_a_target_down_at_first_gets_the_news_when_it_comes_back(env: Env) -> None:
    later = HttpReceiver()  # its port chosen, nothing listening yet
    _config(env, "notify_retry_first_s = 0.5\n")
    try:
        proc = env.cli("launch", "--cmd", "echo done", "--notify", f"webhook:{later.url('/k3y-x')}")
        assert proc.returncode == 0, proc.stdout + proc.stderr  # the run did not wait on it
        assert [r["state"] for r in env.runs()] == ["succeeded"]

        def failed_tries() -> list[dict]:
            (message,) = _notifications(env)
            return [a for a in message["attempts"] if a["outcome"] == "failed"]

        wait_for(lambda: _failed_attempts(env), 60, "a failed attempt recorded")
        tries = failed_tries()  # as `notify ls` shows them, asked once
        assert tries and "k3y-x" not in json.dumps(tries) and tries[0]["error"]
        later.start()
        wait_for(lambda: later.posts, 90, "the message after the target came back")
    finally:
        later.stop()
    (message,) = _notifications(env)
    assert message["state"] == "sent"
    assert [a["outcome"] for a in message["attempts"]][-1] == "sent"
    assert len(message["attempts"]) >= 2
    assert json.loads(later.posts[0].body)["event"] == "succeeded"


@pytest.mark.parametrize(
    ("flags", "config"),
    [
        (["--notify", "slack:ftp://example.com/x"], ""),
        (["--notify", "smtp://me:pw@127.0.0.1:25/"], ""),
        (["--notify", "webhook:http://127.0.0.1:9/x", "--notify-on", "finished"], ""),
        ([], 'notify = ["teams:https://example.com/x"]\n'),
    ],
)
def test_a_bad_target_is_a_one_line_error_and_nothing_launches(
    env: Env, flags: list[str], config: str
) -> None:
    _config(env, config)
    proc = env.cli("launch", "--cmd", "echo never", *flags)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "pw@" not in proc.stderr
    assert env.runs() == []
    sweep = env.cli("sweep", "digits-fast", "--grid", "lr=0.1,0.2", *flags)
    assert sweep.returncode == 2 and sweep.stderr.startswith("error: ")
    assert json.loads(env.cli("sweep", "ls", "--json", check=True).stdout) == []


def test_a_sweep_tells_its_end_with_its_best_trial_and_each_pruned_trial(
    env: Env, receiver: HttpReceiver
) -> None:
    # as test_sweep_local's grid: lr=0.0005 learns nothing, so ASHA prunes it at its first rung
    proc = env.cli(
        "sweep", "digits-fast", "--grid", "lr=0.2,0.0005", "--grid", "batch_size=32,64",
        "--set", "epochs=8", "--set", "threads=1", "--max-parallel", "2",
        "--early-stop", "asha", "--grace-epochs", "1", "--reduction-factor", "2",
        "--name", "told", "--notify", f"webhook:{receiver.url('/sweep-hook')}",
        "--notify-on", "sweep-finished,pruned",
        timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads(env.cli("sweep", "status", "told", "--json", check=True).stdout)
    pruned = {row["run"] for row in status["leaderboard"] if row["status"] == "pruned"}
    assert pruned  # the hopeless trials

    def bodies() -> list[dict]:
        return [json.loads(p.body) for p in receiver.posts]

    wait_for(lambda: len(bodies()) >= len(pruned) + 1, 60, "the sweep's notifications")
    (end,) = [b for b in bodies() if b["event"] == "sweep-finished"]
    best = status["leaderboard"][0]
    assert end["sweep"] == "told" and end["state"] == "completed"
    assert f"best: {best['run']}" in end["text"] and "lr=0.2" in end["text"]
    assert {b["run"] for b in bodies() if b["event"] == "pruned"} == pruned


def test_notify_test_sends_one_message_and_a_down_target_is_a_masked_one_line_error(
    env: Env, receiver: HttpReceiver
) -> None:
    sent = env.cli("notify", "test", f"ntfy:{receiver.url('/test-topic-secret')}")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    (post,) = receiver.posts
    assert post.path == "/test-topic-secret" and "this target works" in post.body.decode()
    assert "test-topic-secret" not in sent.stdout + sent.stderr
    down = HttpReceiver()  # nothing listens on its port
    proc = env.cli("notify", "test", f"slack:{down.url('/services/T0/B0/down-secret')}")
    assert proc.returncode != 0
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "down-secret" not in proc.stderr


def test_lab_run_tells_its_wait_its_interruption_its_recovery_and_its_end(
    env: Env, lab: Lab, receiver: HttpReceiver
) -> None:
    with use_lab(env, lab, **spotlab.FAST):
        config = env.home / "config.toml"  # asks for capacity again after 1 s, then 2 s
        config.write_text(
            "capacity_ask_first_s = 1.0\ncapacity_ask_max_s = 2.0\n" + config.read_text()
        )
        for zone in ZONES:  # dry at first: the run waits for capacity
            lab.capacity.set_spot("c6i.large", zone, 0)
        args = ["launch", "digits-fast", "--cloud", "aws", "--instance-type", "c6i.large", "-d"]
        args += ["--wait-for-capacity", "30m", "--notify", f"webhook:{receiver.url('/lab')}"]
        for item in spotlab.OVERRIDES:
            args += ["--set", item]
        scenario = spotlab.Scenario("notified", env, lab)
        scenario.run_id = env.cli(*args, check=True).stdout.strip()

        def events() -> list[str]:
            return [json.loads(p.body)["event"] for p in receiver.posts]

        wait_for(lambda: "waiting" in events(), 120, "the wait told")
        for zone in ZONES:
            lab.capacity.set_spot("c6i.large", zone, None)
        first = scenario.live_instance()
        scenario.wait_epoch(2)
        lab.interruptions.interrupt(first)  # a spot notice, then EC2 takes the instance back
        scenario.live_instance(other_than=first)
        wait_for(lambda: scenario.state() in ("succeeded", "failed"), 600, "the run's end")
        assert scenario.state() == "succeeded", scenario.events()
        told = ["waiting", "interrupted", "recovered", "succeeded"]
        wait_for(lambda: events() == told, 60, f"{told} told, in order (got {events()})")


def test_email_with_starttls_sends_the_password_only_over_tls(env: Env, tmp_path: Path) -> None:
    cert, tls = self_signed(tmp_path)
    smtp = SmtpReceiver("runner", "tls-pass-secret", tls=tls).start()
    env.vars["SSL_CERT_FILE"] = str(cert)  # the lab's own CA, as a company's would be
    target = f"smtp+starttls://runner:tls-pass-secret@127.0.0.1:{smtp.port}/?to=me@example.com"
    try:
        proc = env.cli("notify", "test", target)
        plain = env.cli("notify", "test", target.replace("smtp+starttls:", "smtp:"))
    finally:
        smtp.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert smtp.logins == ["runner"] and len(smtp.emails) == 1
    assert "this target works" in smtp.emails[0].get_payload()
    assert plain.returncode != 0  # the server asks for STARTTLS first: refused, one line
    assert plain.stderr.startswith("error: ") and plain.stderr.count("\n") == 1, plain.stderr
    for text in (proc.stdout, proc.stderr, plain.stdout, plain.stderr):
        assert "tls-pass-secret" not in text
