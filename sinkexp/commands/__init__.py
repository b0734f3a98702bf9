"""The command layer: each command's arguments read once, here, into the typed settings the packages
below take (docs/glossary.md: command layer). Nothing below it parses an override's text.

COMMANDS declares the six, once each: name, summary, description, positional arguments and --flags
(a `flags` dataclass), KEY=VALUE keys (a `keys` dataclass), whether -m sweeps, examples, and the
module whose main(argv) runs it. Their parser, usage line, --help and completion are generated from
the declaration (config/arguments.py, config/helptext.py); the dataclasses are in
config/settings.py. `train`'s keys are its Hydra config's, so their completion is Hydra's and its
--help is Hydra's help template (configs/config.yaml), whose header is the generated help of its
declaration (usage, flags, examples) and the rest the config's groups, choices and keys.
"""

from __future__ import annotations

from sinkexp.config.arguments import Command
from sinkexp.config.settings import (
    ExportConfig,
    InterveneConfig,
    MeasureConfig,
    ReportConfig,
    ReproduceFlags,
    TrainFlags,
)


def papers() -> list[str]:
    """What reproduce's PAPER may be: all, or a paper's name."""
    from sinkexp.reproduce.papers import PAPERS  # lazy: the papers' declarations, only when asked for

    return ["all", *PAPERS]


COMMANDS = {
    "train": Command(
        "train",
        "train one model, or sweep with -m (sinkexp train --help lists the options)",
        "Train one model (or a sweep with -m) and write its run directory.",
        flags=TrainFlags,
        overrides="any key of the config below (a group's option: attn=relu; a key: model.n_heads=4)",
        sweeps=True,
        examples=(
            "sinkexp train task=trigger attn=relu model.n_layers=2 seed=1",
            "sinkexp train -m task=trigger attn=softmax,relu seed=0,1",
        ),
    ),
    "report": Command(
        "report",
        "collect the runs below a directory into summary.csv and figures (sinkexp report DIR; --list: one line each)",
        "Collect every run below DIR into one table and draw the figures, in DIR/report (docs/sweeps.md).",
        flags=ReportConfig,
        examples=("sinkexp report outputs/sweeps/mygrid", "sinkexp report outputs/sweeps/mygrid --list --dpi 200"),
        module="sinkexp.report.runs",
    ),
    "reproduce": Command(
        "reproduce",
        "run a paper's experiments and check its claims (sinkexp reproduce PAPER|all|--list)",
        "Run a paper's experiments and judge its claims (docs/reproduce.md).",
        flags=ReproduceFlags,
        overrides="any key of sinkexp train, for every run (scale=reach, device=cuda, hydra.launcher.n_jobs=4), "
        "and weights=DIR, the folder of the shipped checkpoints",
        examples=(
            "sinkexp reproduce gu2025",
            "sinkexp reproduce all scale=reach --estimate",
            "sinkexp reproduce --list",
            "sinkexp reproduce --docs docs",
        ),
        choices=papers,
        module="sinkexp.reproduce.command",
        loads_torch_later=True,
    ),
    "intervene": Command(
        "intervene",
        "causal interventions on a finished run's sink (sinkexp intervene RUN_DIR [--layer L])",
        "The interventions below, on a trained or a measured run: a table per layer and intervention, then a legend.",
        flags=InterveneConfig,
        examples=("sinkexp intervene RUN_DIR --layer 0 1",),
        module="sinkexp.analysis.intervene",
    ),
    "measure": Command(
        "measure",
        "sinkexp's metrics on a Hugging Face causal LM (sinkexp measure MODEL; needs pip install -e .[hf])",
        "sinkexp's metrics on a causal LM (docs/measure.md). MODEL: a model folder (config.json, weights,\n"
        "tokenizer), a Hugging Face hub id, a .gguf file, or a shipped checkpoint: smollm2-135m, gemma3-270m\n"
        "(bash scripts/setup.sh --weights).",
        keys=MeasureConfig,
        sweeps=True,
        examples=(
            "sinkexp measure smollm2-135m",
            "sinkexp measure -m gemma3-270m bos=true,false",
            "sinkexp measure outputs/export/my-run",
            "sinkexp measure EleutherAI/pythia-14m revision=step1000 n=100 seq_len=64",
            "sinkexp measure -m model=EleutherAI/pythia-14m,EleutherAI/pythia-70m revision=step1000,step143000 "
            "name=pythia",
        ),
        module="sinkexp.commands.measure",
        needs_transformers=True,
    ),
    "export": Command(
        "export",
        "a finished model=llama run as a Hugging Face LlamaForCausalLM folder (sinkexp export RUN_DIR [OUT])",
        "A finished model=llama run as a LlamaForCausalLM folder (docs/measure.md).",
        flags=ExportConfig,
        examples=("sinkexp export RUN_DIR outputs/export/my-llama",),
        module="sinkexp.hf.export",
        needs_transformers=True,
    ),
}
