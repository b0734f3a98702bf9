"""What happens when over training, computed from the step alone, so that a resumed run does
exactly what an uninterrupted one does.

The learning rate: a linear warm-up (train.warmup steps), then a schedule (train.schedule), as a
factor of train.lr:

    lr(step) = train.lr * min(1, (step + 1) / warmup) * SCHEDULES[schedule](progress)
    progress = (step - warmup) / (steps - warmup), 0 during the warm-up

The checkpoints: every train.checkpoint_every steps and at the last step, plus the steps of
train.checkpoint_steps: `log` (1, 2, 3, 4, 6, 8, 12, 16, ...: 2^k and 3 * 2^(k-1) below
checkpoint_every, dense where sinks form, as Pythia keeps 1, 2, 4, ..., 512) or a list of steps.
"""

from __future__ import annotations

import bisect
import math

# schedule -> progress in [0, 1] -> factor
SCHEDULES = {
    "constant": lambda progress: 1.0,
    "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)),
}  # to 0 at the last step


def lr_factor(step: int, steps: int, warmup: int, schedule: str) -> float:
    """The factor of train.lr for the optimiser step taken at `step` (0-based)."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    progress = max(0.0, (step - warmup) / max(1, steps - warmup))
    return ramp * SCHEDULES[schedule](progress)


def log_steps(below: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24, ...: the steps 2^k and 3 * 2^(k-1) below `below`."""
    steps, power = [], 1
    while power < below:
        steps += [power] + ([power * 3 // 2] if power >= 2 and power * 3 // 2 < below else [])
        power *= 2
    return steps


class Checkpoints:
    """The checkpoint steps of one run: every `every` steps, the last step, and `extra` (train.checkpoint_steps)."""

    def __init__(self, every: int, steps: int, extra=None):
        self.every, self.steps = every, steps
        chosen = log_steps(every) if extra == "log" else list(extra or ())
        self.extra = sorted({step for step in chosen if 0 < step < steps})
        self.extra_set = frozenset(self.extra)  # asked at every training step

    def __contains__(self, step: int) -> bool:
        return step == self.steps or step % self.every == 0 or step in self.extra_set

    def after(self, step: int) -> int:
        """The first checkpoint step after `step`."""
        candidates = [(step // self.every + 1) * self.every, self.steps]
        i = bisect.bisect_right(self.extra, step)
        if i < len(self.extra):
            candidates.append(self.extra[i])
        return min(candidates)
