"""Load a finished run, draw its attention maps, and ablate its sink.

    .venv/bin/sinkexp train attn=softmax train.keep_checkpoints=true train.checkpoint_steps=log \
        hydra.run.dir=outputs/demo
    .venv/bin/python examples/inspect_run.py outputs/demo

Writes <run>/inspect/attention.png, the held-out batch's attention maps at the loaded step drawn by
`sinkexp report`'s own code (sinkexp/report/maps.py: every layer and head, per query type, the sink's
column marked, one log colour bar; at the last step they are the run's attention_<setting>.png), and
prints three things:
  - the losses recomputed from the loaded model (they equal losses.csv's last evaluation);
  - the ablation: every layer's value at the sink set to zero with the attention weights held fixed
    (`sinkexp.model.intervene` on `blocks.<l>.attn.v`), its loss per query type, and how much the
    output moved (RMS) at each query type: a no-op sink (small ||W_O v_sink||) barely moves anything;
  - with train.keep_checkpoints, the attention on the sink at every kept step (sink formation;
    train.checkpoint_steps=log keeps steps 1, 2, 3, 4, 6, 8, ... where it happens).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import torch  # noqa: E402

from sinkexp import load_run  # noqa: E402
from sinkexp.analysis.interventions import sink_keys, zero_sink_value  # noqa: E402
from sinkexp.evaluate.evaluator import mean_attention  # noqa: E402
from sinkexp.evaluate.metrics.sink_attention import sink_attn  # noqa: E402
from sinkexp.model import intervene  # noqa: E402
from sinkexp.report.maps import draw_maps  # noqa: E402


def losses_by_query_type(run, pred: torch.Tensor) -> dict[str, float]:
    per_position = run.task.loss(pred, run.batch)
    out = {}
    for index, name in enumerate(run.task.query_types):
        chosen = (run.batch.query_type == index) & run.batch.loss_mask
        if chosen.any():
            out[name] = per_position[chosen].mean().item()
    return out


def draw_attention(run, path: Path) -> dict:
    """The maps attention.npz holds (the same function computes them), drawn as `sinkexp report` draws them."""
    maps = mean_attention(run.model, run.batch, run.task.query_types)
    title = f"{run.cfg.task.name}, attn={run.cfg.attn.name}, step {run.step}: attention on the held-out batch"
    draw_maps(maps, title, path)
    return maps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory")
    args = parser.parse_args()

    run = load_run(args.run)
    names = [f"blocks.{layer}.attn.weights" for layer in range(len(run.model.blocks))]
    pred, _ = run.forward(names)
    draw_attention(run, args.run / "inspect" / "attention.png")
    print(f"run {args.run} at step {run.step}: attention maps in {args.run / 'inspect' / 'attention.png'}")

    before = losses_by_query_type(run, pred)
    recorded = run.losses[(run.losses["step"] == run.step) & run.losses["split"].str.startswith("eval/")]
    print("loss per query type, recomputed | as recorded in losses.csv:")
    for name, value in before.items():
        written = recorded.loc[recorded["split"] == f"eval/{name}", "loss"]
        print(f"  {name:<14}{value:.6f} | {written.iloc[0]:.6f}" if len(written) else f"  {name:<14}{value:.6f}")

    _, sink_positions = sink_keys(run.model, run.batch)
    zero = zero_sink_value(sink_positions, sink_positions)["v"]
    ablation = {f"blocks.{layer}.attn.v": zero for layer in range(len(run.model.blocks))}
    with torch.no_grad(), intervene(run.model, ablation):
        ablated = run.model(run.batch.inputs)
    after = losses_by_query_type(run, ablated)
    change = (ablated - pred).pow(2).mean(-1).sqrt() if ablated.is_floating_point() else None
    print("sink's value zeroed in every layer (attention weights fixed):")
    for index, name in enumerate(run.task.query_types):
        if name in after:
            moved = change[run.batch.query_type == index].mean().item()
            print(f"  {name:<14}loss {before[name]:.6f} -> {after[name]:.6f}   RMS output change {moved:.4g}")

    steps = run.kept_steps()
    if steps:
        print("attention on the sink over training (mean over heads and queries of each type):")
        tokens = run.model.anatomy(run.batch.inputs.shape[1]).tokens
        for step in steps:
            kept = load_run(args.run, step=step)
            _, kept_cache = kept.forward(names)
            cells = []
            for layer, name in enumerate(names):
                weights = kept_cache[name][:, :, tokens][..., tokens]  # (B, H, T, T) over the task's tokens
                for index, query in enumerate(kept.task.query_types):
                    queries = kept.batch.query_type == index
                    if queries.any():
                        cells.append(f"layer {layer} {query} {sink_attn(weights, kept.batch.sink, queries).mean():.3f}")
            print(f"  step {step:>6}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
