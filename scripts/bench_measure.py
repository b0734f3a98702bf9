"""Benchmark: `sinkexp measure`'s pass against a plain forward with attention outputs.

    .venv/bin/python scripts/bench_measure.py                  # about a minute on 2 CPU cores
    .venv/bin/python scripts/bench_measure.py --n 100 --seq-len 64 --chunk 25 --reps 3 --threads 2
    .venv/bin/python scripts/bench_measure.py --model smollm2-135m   # a real checkpoint (docs/measure.md)

Both sides run the same model on the same N x T token ids, alternating repetitions so that drift in
the machine hits both alike. The model: by default a randomly initialised one of Pythia-70M's shape
(GPT-NeoX, 6 layers, d_model 512, 8 heads, vocabulary 50304; built from its config here, no
download) on random ids; with --model, what `sinkexp measure MODEL` reads (a shipped name from the
cache, a .gguf, a folder: hf/measure.load_checkpoint) on the sequences it measures (KJV, BOS auto).
- reference: what a script such as Gu et al.'s eval_sink_open_source.py does, the model loaded with
  attn_implementation="eager" and called with output_attentions=True and output_hidden_states=True
  (every layer's maps and states returned);
- measure: sinkexp.hf.measure.measure, the forward pass with sinkexp's taps and every metric row of
  every layer (docs/metrics.md), the taps of a layer dropped once its rows are made.
Both run in one process with the allocator `sinkexp measure` sets (glibc's freed memory kept,
sinkexp/machine/allocator.py); `--glibc` leaves glibc's defaults for both.
Reported: seconds per pass of each and the measure / reference ratio. Another process on the
machine makes the numbers invalid: they are marked so.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import torch
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from sinkexp.hf import sources
from sinkexp.hf.measure import load_checkpoint, load_model, measure
from sinkexp.machine.allocator import keep_freed_memory
from sinkexp.machine.benchmark import load, machine, time_sides, validity


def pythia_70m_shaped(folder: str) -> str:

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=50304,
        hidden_size=512,
        num_hidden_layers=6,
        num_attention_heads=8,
        intermediate_size=2048,
        max_position_embeddings=2048,
        rotary_pct=0.25,
    )
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="what `sinkexp measure` reads, e.g. smollm2-135m")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=None, help="sequences per pass of the measure side")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--glibc", action="store_true", help="glibc's malloc defaults for both sides")
    args = parser.parse_args()
    allocator = "glibc defaults" if args.glibc else keep_freed_memory()

    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    if args.model:
        folder, ours = load_checkpoint(args.model, None, "float32", device)
        eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        tokenizer = sources.load_tokenizer(folder, args.model)
        inputs = sources.sequences(tokenizer, ours.config, "kjv", args.n, args.seq_len, "auto")
        described = f"{args.model} ({ours.config.model_type}, {folder})"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = pythia_70m_shaped(tmp)
            ours = load_model(folder, "float32", device)
            eager = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        inputs = torch.randint(0, 50304, (args.n, args.seq_len), generator=torch.Generator().manual_seed(1))
        described = "Pythia-70M-shaped GPT-NeoX (random weights)"

    @torch.no_grad()
    def reference():
        return eager(input_ids=inputs, output_attentions=True, output_hidden_states=True, use_cache=False).attentions

    sides = {"reference": reference, "measure": lambda: measure(ours, inputs, chunk=args.chunk)}
    before = load()
    seconds = {side: [1 / rate for rate in rates] for side, rates in time_sides(sides, 1, args.reps, warmup=1).items()}
    median = {side: statistics.median(values) for side, values in seconds.items()}
    print(machine(args.threads))
    print(f"{described}, {args.n} x {args.seq_len} tokens, chunk {args.chunk or args.n}")
    print(f"allocator (both sides): {allocator}")
    for side, values in seconds.items():
        print(
            f"  {side:<10} {median[side]:7.3f} s per pass (median of {args.reps}: "
            + ", ".join(f"{v:.3f}" for v in values)
            + ")"
        )
    print(f"measure / reference: {median['measure'] / median['reference']:.2f}x" + validity([before, load()]))


if __name__ == "__main__":
    main()
