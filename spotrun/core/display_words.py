"""One name and one format per metric and per state, on every screen: the follow view of
`launch`, `ls`, `status`, the job's own lines in `logs`, a sweep's trials and its leaderboard.

The ledger, metrics.jsonl and every --json keep the raw names (test_acc 0.9916, stopped); only
what people read goes through here: `acc 99.2%`, `loss 0.1012`, `pruned`.
"""

from __future__ import annotations

from collections.abc import Mapping

from spotrun.core.durations import show_duration

# a metric's name on screen; one not listed shows its own name, underscores as spaces
METRIC_WORDS = {
    "test_acc": "acc",
    "train_acc": "train acc",
    "train_loss": "loss",
    "test_loss": "test loss",
    "test_loss_per_char": "test loss/char",
    "test_perplexity": "perplexity",
    "elapsed_s": "training",
}
# what a one-line summary of a run shows, in this order
HEADLINE = ("test_acc", "train_loss", "step")
LOSS_DIGITS = 4  # significant digits of a loss: 0.1012, 2.346


def metric_word(name: str) -> str:
    return METRIC_WORDS.get(name, name.replace("_", " "))


def show_metric_value(name: str, value: object) -> str:
    """An accuracy as a percentage to one decimal, seconds as a duration, a count as it is,
    any other figure (a loss) to four significant digits."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if name.endswith("_acc") or name == "acc":
        return f"{100 * value:.1f}%"
    if name.endswith("_s"):
        return show_duration(value)
    return f"{value:.{LOSS_DIGITS}g}"


def show_metric(name: str, value: object) -> str:
    return f"{metric_word(name)} {show_metric_value(name, value)}"


def show_metrics(metrics: Mapping[str, object], names: tuple[str, ...] | None = None) -> str:
    """The metrics as one line: `names` in their order (those present), else every metric."""
    chosen = names if names is not None else tuple(metrics)
    return "  ".join(show_metric(name, metrics[name]) for name in chosen if name in metrics)


def shown_state(state: str, *, pruned: bool = False) -> str:
    """A run's state on screen: a sweep trial that its early stopping ended reads `pruned`
    everywhere (the ledger keeps `stopped`)."""
    return "pruned" if pruned else state
