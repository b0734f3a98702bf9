"""The learning rate over training: a linear warm-up (train.warmup steps), then a schedule
(train.schedule), as a factor of train.lr computed from the step alone, so that a resumed run
takes exactly the rates an uninterrupted one does.

    lr(step) = train.lr * min(1, (step + 1) / warmup) * SCHEDULES[schedule](progress)
    progress = (step - warmup) / (steps - warmup), 0 during the warm-up
"""
from __future__ import annotations

import math

# schedule -> progress in [0, 1] -> factor
SCHEDULES = {"constant": lambda progress: 1.0,
             "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress))}   # to 0 at the last step


def lr_factor(step: int, steps: int, warmup: int, schedule: str) -> float:
    """The factor of train.lr for the optimiser step taken at `step` (0-based)."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    progress = max(0.0, (step - warmup) / max(1, steps - warmup))
    return ramp * SCHEDULES[schedule](progress)
