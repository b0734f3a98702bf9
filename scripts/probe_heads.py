"""Where a multi-head trigger model's no-op goes, per head, for finished runs.

    python scripts/probe_heads.py RUN_DIR [RUN_DIR ...]     # e.g. outputs/reproduce/ranmilo2026/four_heads/**/s0-*

For each run (task=trigger, one layer), on its held-out batch, per head h:
- attention at non-trigger queries on BOS, and at trigger queries on BOS, on the query itself and on
  the other (content) keys;
- c_h = R W_O^h (A V)_h, what the head adds to the prediction (R the readout), at non-trigger
  queries: its RMS, and the cancellation of the heads after the readout, |sum_h c_h| / sum_h |c_h|
  (1: the heads add up; 0: they cancel exactly), next to the same ratio before the readout
  (`head_cancellation`, docs/metrics.md); undefined (NaN) where the heads write nothing;
- the heads' composite maps M_h = R W_O^h W_V^h (from the attention's input to the prediction):
  |sum_h M_h|_F / sum_h |M_h|_F. Near 0, heads that attend alike add nothing whatever they attend
  to: the no-op needs no sink.
Prints one table, a row per run and head (--summary: a row per run, the extremes over its heads).
Reads the run directory only through load_run.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch

from sinkexp import load_run


@torch.no_grad()
def probe(path) -> list[dict]:
    run = load_run(path)
    layer = run.model.blocks[0].attn
    pred, cache = run.forward(["blocks.0.attn.weights", "blocks.0.attn.mixed"])
    weights, mixed = cache["blocks.0.attn.weights"], cache["blocks.0.attn.mixed"]  # (B,H,T,S), (B,H,T,D)
    B, H, T, D = mixed.shape
    query = run.batch.query_type  # (B, T): 0 trigger, 1 not
    out = layer.out.weight if isinstance(layer.out, torch.nn.Linear) else torch.eye(H * D)  # model.attn_out=identity
    w_o = out.view(-1, H, D)  # (d_model, H, D)
    per_head = torch.einsum("bhtd,ehd->bhte", mixed, w_o)  # W_O^h (A V)_h
    readout = run.model.readout  # R (its bias is added once)
    r = readout.weight if isinstance(readout, torch.nn.Linear) else torch.eye(w_o.shape[0])
    after = per_head @ r.T  # c_h (B, H, T, out)
    eye = torch.eye(T, dtype=torch.bool)
    rows = []
    for h in range(H):
        on = {name: weights[:, h][query == index] for name, index in (("trigger", 0), ("non_trigger", 1))}
        self_mass = weights[:, h, :, :T][:, eye][query == 0]  # trigger query on itself
        rows.append(
            {
                "run": run.path.name,
                "attn": run.cfg.attn.name,
                "mode": run.cfg.task.mode,
                "steps": run.cfg.train.steps,
                "d_model": run.cfg.model.d_model,
                "W_O": run.cfg.model.attn_out,
                "readout": "fixed" if run.cfg.model.freeze_readout else "learned",
                "head": h,
                "bos@non_trigger": on["non_trigger"][:, 0].mean().item(),
                "bos@trigger": on["trigger"][:, 0].mean().item(),
                "self@trigger": self_mass.mean().item(),
                "rest@trigger": (on["trigger"][:, 1:T].sum(-1) - self_mass).mean().item(),
                "rms c_h@non_trigger": after[:, h][query == 1].pow(2).mean().sqrt().item(),
            }
        )
    nt = query == 1
    total = after.sum(1)[nt].norm(dim=-1)  # |sum_h c_h| per query
    parts = after.permute(0, 2, 1, 3)[nt].norm(dim=-1).sum(-1)  # sum_h |c_h|
    before = per_head.sum(1)[nt].norm(dim=-1) / per_head.permute(0, 2, 1, 3)[nt].norm(dim=-1).sum(-1)
    w_v = layer.qkv.weight.chunk(3, dim=0)[2].view(H, D, -1)  # (H, D, d_model)
    maps = torch.einsum("oe,ehd,hdi->hoi", r, w_o, w_v)  # M_h (H, out, d_model)
    for row in rows:
        row["maps sum"] = (maps.sum(0).norm() / maps.norm(dim=(1, 2)).sum()).item()
        row["cancel after readout"] = (total / parts).mean().item()
        row["cancel before readout"] = before.mean().item()
        row["loss/ref trigger"] = run.summary["loss"]["trigger"] / run.summary["baseline_loss"]["trigger"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--summary", action="store_true", help="one row per run: the extremes over its heads")
    args = parser.parse_args()
    table = pd.DataFrame([row for path in args.runs for row in probe(path)])
    if args.summary:
        keys = ["run", "attn", "mode", "steps", "d_model", "W_O", "readout"]
        table = (
            table.groupby(keys, sort=False)
            .agg(
                **{
                    "max bos@non_trigger": ("bos@non_trigger", "max"),
                    "max bos@trigger": ("bos@trigger", "max"),
                    "heads >0.5 content@trigger": ("rest@trigger", lambda x: int((x > 0.5).sum())),
                    "cancel after readout": ("cancel after readout", "first"),
                    "cancel before readout": ("cancel before readout", "first"),
                    "maps sum": ("maps sum", "first"),
                    "loss/ref trigger": ("loss/ref trigger", "first"),
                }
            )
            .reset_index()
        )
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:.3g}".format):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
