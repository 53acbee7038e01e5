"""Every speed-up method as a plain function, for use in any PyTorch training loop."""

from spotrun.train.methods.label_smoothing import smooth_labels
from spotrun.train.methods.schedules import one_cycle_lr, one_cycle_momentum, warmup_decay_lr

__all__ = [
    "one_cycle_lr",
    "one_cycle_momentum",
    "smooth_labels",
    "warmup_decay_lr",
]
