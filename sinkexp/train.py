"""A short trainer: fresh batches from a seeded generator, one optimiser step each.

It knows nothing about sinks. Every `eval_every` steps (and at step 0 and the last step) it calls
`on_eval(step)`, every `log_every` steps `on_log(step, mean train loss since the last log)`, every
`checkpoint_every` steps (and at the end) `on_checkpoint(step)`. Its `state_dict` holds everything
needed to continue bit-for-bit on the same device: model, optimiser, data generator, step and the
partial train-loss window.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
from tqdm import tqdm

from sinkexp.config import TrainConfig


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optim == "sgd":
        return torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas),
                             weight_decay=cfg.weight_decay)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp_min(1)


class Trainer:
    def __init__(self, model, task, cfg: TrainConfig, generator: torch.Generator, device: torch.device):
        self.model, self.task, self.cfg = model, task, cfg
        self.generator, self.device = generator, device
        self.optimizer = make_optimizer(model, cfg)
        self.step = 0
        self.window_sum = torch.zeros((), device=device)   # train loss summed since the last log
        self.window_len = 0

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "step": self.step,
                "window_sum": self.window_sum, "window_len": self.window_len}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step, self.window_len = state["step"], state["window_len"]
        self.window_sum = state["window_sum"].to(self.device)

    def train_step(self) -> torch.Tensor:
        batch = self.task.sample(self.cfg.batch_size, self.generator, self.device)
        loss = masked_mean(self.task.loss(self.model(batch.inputs), batch), batch.loss_mask)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def fit(self, *, eval_every: int, on_eval: Callable, on_log: Callable, on_checkpoint: Callable) -> float:
        """Train up to cfg.steps; returns the steps/s of this call (evaluation included)."""
        cfg = self.cfg
        if self.step == 0:
            on_eval(0)
        first, started = self.step, time.perf_counter()
        bar = tqdm(total=cfg.steps, initial=self.step, desc="train", unit="step",
                   dynamic_ncols=True, mininterval=1.0)
        while self.step < cfg.steps:
            # No host synchronisation here: the loss is summed on the device and read at log time.
            self.window_sum += self.train_step()
            self.window_len += 1
            self.step += 1
            bar.update(1)
            last = self.step == cfg.steps
            if self.step % cfg.log_every == 0 or last:
                mean_loss = (self.window_sum / self.window_len).item()
                self.window_sum.zero_()
                self.window_len = 0
                bar.set_postfix(loss=f"{mean_loss:.4g}")
                on_log(self.step, mean_loss)
            if self.step % eval_every == 0 or last:
                on_eval(self.step)
            if self.step % cfg.checkpoint_every == 0 or last:
                on_checkpoint(self.step)
        bar.close()
        elapsed = time.perf_counter() - started
        return (self.step - first) / elapsed if elapsed > 0 else float("nan")
