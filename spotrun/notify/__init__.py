"""Notifications: a run's or sweep's news sent to Slack, ntfy, a JSON webhook or by email.

`targets` parses and masks what the user gives (--notify, config.toml's `notify`);
`target_file` keeps the targets themselves (their secrets) in a 0600 file under SPOTRUN_HOME,
the ledger holding only their ids; `queue` is the ledger's outbox; `announce` turns a run's
moves into queued messages; `senders` and `outbox` deliver them from the controller, with
`backoff`'s retries. Nothing here ever holds a run up: a message that cannot be sent waits.
"""
