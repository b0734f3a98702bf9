"""The command layer's reading of KEY=VALUE overrides, once, into the Sweep that jobs/plan.py
composes and checks (config/sweep.py): `sinkexp train`'s command line (cli.py) and each experiment
of `sinkexp reproduce` (reproduce/sweeps.py). Below the command nothing reads an override string
again (tests/config/test_arguments.py).

    sweep = read_sweep(["experiment=trigger_grid", "train.steps=1e3"], multirun=True)
    sweep.overrides    # ("+experiment=trigger_grid", "train.steps=1000")
"""

from __future__ import annotations

from sinkexp.config.compose import as_hydra_override, choices_of, pack_first_values, parse, whole_numbers
from sinkexp.config.sweep import Sweep, is_hydra_key


def read_sweep(overrides: list[str], multirun: bool, command: str = "sinkexp train") -> Sweep:
    """The overrides read with Hydra's parser: `experiment=` as Hydra spells it, a whole number as
    an integer (`train.steps=1e3`: compose.whole_numbers), a pack's first values as the job's own
    (compose.pack_first_values). ConfigError, one line, for one that cannot be read, is not whole or
    sweeps without -m (`command -m`)."""
    lines = whole_numbers([as_hydra_override(o) for o in overrides])
    lines += pack_first_values(lines)
    parsed = parse(lines)
    own = [o for o in parsed if not is_hydra_key(o.key_or_group)]
    hydra_keys = [o for o in parsed if o.key_or_group.startswith("hydra.")]  # values, not groups
    return Sweep(
        overrides=tuple(lines),
        multirun=multirun,
        master=tuple(o.input_line for o in parsed if not o.is_sweep_override()),
        own=tuple(o.input_line for o in own),
        choices=choices_of(own, multirun, command),
        hydra=tuple(o.input_line for o in parsed if is_hydra_key(o.key_or_group)),
        hydra_keys=tuple(o.key_or_group for o in hydra_keys),
        master_hydra_keys=tuple(o.key_or_group for o in hydra_keys if not o.is_sweep_override()),
    )
