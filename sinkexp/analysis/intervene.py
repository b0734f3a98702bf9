"""`sinkexp intervene RUN_DIR [--layer L ...] [--seed N] [--unfinished] [--sequences N]`: the
interventions of analysis/interventions.py on a trained run, or of analysis/lm_interventions.py on a
`sinkexp measure` run, as a table per layer and intervention, then a legend of what each row changed
(each intervention's one line, from the DEFINITIONS beside its function).
"""

from __future__ import annotations

import pandas as pd

from sinkexp.analysis import interventions, lm_interventions
from sinkexp.analysis.interventions import COLUMNS, DEFINITIONS, ROWS
from sinkexp.analysis.load import load_run
from sinkexp.analysis.measured import MeasuredRun
from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import read
from sinkexp.config.helptext import help_text
from sinkexp.errors import ConfigError, refuse
from sinkexp.hf import quantization
from sinkexp.rundir.faults import run_file_error
from sinkexp.rundir.reading import FINISHED, RunFiles, run_status


def main(argv: list[str]) -> int:
    """`sinkexp intervene RUN_DIR [--layer L ...] [--seed N] [--unfinished]`: the table for a
    finished run, or with --unfinished for an unfinished one at its last checkpoint (the step said)."""
    try:
        given = read(COMMANDS["intervene"], argv)
    except ConfigError as err:
        return refuse(err)
    if given.help:
        print(help_page())
        return 0
    args = given.flags
    try:
        run = load_run(args.run)
        state, reason = run_status(run.path)
        why = f"{state}: {reason}" if reason else state
    except (OSError, RuntimeError, ConfigError) as err:
        reason = run_file_error(err, doing="read") if isinstance(err, OSError) and err.errno else err
        return refuse(reason)
    if isinstance(run, MeasuredRun) or args.sequences is not None:
        return intervene_measured(run, args)
    if state not in FINISHED:
        reading = f"its last checkpoint, step {run.step} of train.steps={run.cfg.train.steps}"
        if not args.unfinished:
            return refuse(
                f"{run.path} has not finished ({why}); finish it with the sinkexp train command "
                f"that started it, or pass --unfinished to read {reading}"
            )
        print(f"{run.path} has not finished ({why}): reading {reading}")
    n_layers = len(run.model.blocks)
    layers = range(n_layers) if args.layer is None else args.layer
    bad = [layer for layer in layers if not 0 <= layer < n_layers]
    if bad:
        return refuse(f"--layer {bad[0]} is not valid; the run has layers 0..{n_layers - 1}")
    print_interventions(run, layers, args.seed)
    return 0


def help_page() -> str:
    """The command's generated --help, then what the interventions are and what each row changes
    (interventions.py's docstring and DEFINITIONS, lm_interventions.py's for a measured run)."""
    measured = "\n".join(f"  {name}  {text}" for name, text in lm_interventions.DEFINITIONS.items())
    about = interventions.__doc__.split("\n\n")[0]
    also = f"on a sinkexp measure run, also (and {lm_interventions.KL}):\n{measured}"
    return f"{help_text(COMMANDS['intervene'])}\n\n{about}\n{legend(DEFINITIONS)}\n{also}"


def print_table(
    table: pd.DataFrame, values=("loss", "rms_change"), definitions: dict = DEFINITIONS, columns: str = COLUMNS
) -> None:
    """An intervention table as `sinkexp intervene` prints it: a row per layer and intervention,
    `values` per query type, then the legend: `columns` and each row's line of `definitions`."""
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(
            table.pivot_table(index=["layer", "intervention"], columns="query_type", values=list(values), sort=False)
            .round(5)
            .to_string()
        )
    print(legend(definitions, table["intervention"].unique(), columns))


def print_interventions(run, layers, seed: int) -> None:
    """The intervention table of `layers`, then the BOS removal and the broadcast transfer where they apply."""
    print_table(
        pd.concat([interventions.run_interventions(run, layer, seed=seed) for layer in layers], ignore_index=True)
    )
    if run.task.has_bos:
        removed = interventions.without_bos(run)
        print(
            f"BOS removed at inference: attention on the first position {removed['first_attn_bos']:.4f} -> "
            f"{removed['first_attn_no_bos']:.4f}, loss {removed['loss_bos']:.5f} -> {removed['loss_no_bos']:.5f}"
        )
    if run.cfg.task.name == "broadcast":
        for layer in layers:
            transfer = interventions.payload_transfer(run, layer)
            print(
                f"layer {layer}, donor sink value: payload cosine {transfer['cosine']:.4f}, "
                f"common energy of the change {transfer['common_energy']:.5f}"
            )


def legend(definitions: dict[str, str], names=None, columns: str = COLUMNS) -> str:
    """What each intervention of `names` (all of them by default) is, a line each, from `definitions`:
    the registry the rows came from (this module's DEFINITIONS, or another's of the same form)."""
    names = list(definitions) if names is None else list(names)
    width = max(map(len, names))
    lines = [f"  {name:<{width}}  {definitions[name]}" for name in names]
    return "\n".join([columns, ROWS, *lines])


def print_measured(run, layers, seed: int) -> None:
    """`sinkexp intervene` on a measured run: the table, each layer's massive activations, the first token removed."""
    massive = lm_interventions.find_massive(run, layers, seed)
    N, T = run.inputs.shape
    weights = quantization.of_run(RunFiles(run.path).config)
    said = f" ({quantization.short(weights['file_type'])})" if weights else ""
    print(f"{run.path}: {run.cfg.model}{said}, {N} sequences of {T} tokens; the sink is position 0")
    table = lm_interventions.lm_interventions(run, layers, seed=seed, massive=massive)
    every = {**DEFINITIONS, **lm_interventions.DEFINITIONS}
    print_table(table, values=["loss", "rms_change", "kl"], definitions=every, columns=lm_interventions.COLUMNS)
    for layer in layers:
        found = massive[layer]
        if not len(found.entries):
            factor = lm_interventions.MASSIVE_FACTOR
            print(f"layer {layer}: no massive activation (|h| >= {factor:g} x the sequence's median |h|)")
            continue
        positions = sorted(set(found.entries[:, 1].tolist()))
        channels = sorted(set(found.entries[:, 2].tolist()))
        sequences, largest = len(set(found.entries[:, 0].tolist())), found.values.abs().max()
        print(
            f"layer {layer}: {len(found.entries)} massive activations in {sequences} sequences, positions "
            f"{short(positions)}, channels {short(channels)}, |h| up to {largest:.4g}"
        )
    removed = lm_interventions.first_token_removed(run)
    print(
        f"first position removed at inference: attention on the first position {removed['first_attn_first']:.4f} -> "
        f"{removed['first_attn_no_first']:.4f}, loss {removed['loss_first']:.5f} -> {removed['loss_no_first']:.5f}"
    )


def short(values: list[int], most: int = 8) -> str:
    """A list of ints, cut after `most` with how many more."""
    return ", ".join(map(str, values[:most])) + (f" (+{len(values) - most} more)" if len(values) > most else "")


def intervene_measured(run, args) -> int:
    """`sinkexp intervene` on a `sinkexp measure` run (main parses the arguments), on its first
    --sequences sequences; 2 with one line for a bad --layer or --sequences."""
    problem = None
    if not isinstance(run, MeasuredRun):
        problem = "--sequences applies to a sinkexp measure run only"
    elif args.sequences is not None and not 1 <= args.sequences <= len(run.inputs):
        problem = f"--sequences {args.sequences} is not valid; choose 1..{len(run.inputs)}"
    else:
        bad = [layer for layer in args.layer or () if not 0 <= layer < run.n_layers]
        problem = f"--layer {bad[0]} is not valid; the run has layers 0..{run.n_layers - 1}" if bad else None
    if problem:
        return refuse(problem)
    run.inputs = run.inputs[: args.sequences]
    print_measured(run, list(range(run.n_layers)) if args.layer is None else args.layer, args.seed)
    return 0
