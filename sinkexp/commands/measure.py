"""`sinkexp measure [-m] [MODEL] [KEY=VALUE ...]`: the command line read once, with Hydra's override
grammar and sweep order as `sinkexp train` reads its own (config/compose.py), into one checked
MeasureConfig per job (config/settings.py), each planned and then measured by hf/runner.py.

A problem with the command line or a job (an unknown key, a key given twice, a model that is not
there) is one line and exit code 2, with nothing written.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from sinkexp.config.compose import expand, given_once
from sinkexp.config.compose import parse as parse_overrides
from sinkexp.config.settings import MeasureConfig, measure_config
from sinkexp.errors import ConfigError
from sinkexp.hf.runner import Measurement, plan_measurement, run_measurement, utc_stamp

KEYS = [field.name for field in dataclasses.fields(MeasureConfig)]
USAGE = (
    """usage: sinkexp measure [-m] [MODEL] [KEY=VALUE ...]
  MODEL (or model=): a model folder (config.json, weights, tokenizer), a Hugging Face hub id, a .gguf
    file, or a shipped checkpoint: smollm2-135m, gemma3-270m (bash scripts/setup.sh --weights)
  keys: """
    + ", ".join(KEYS)
    + """ (defaults and meaning: docs/measure.md)
  e.g. sinkexp measure smollm2-135m
       sinkexp measure -m gemma3-270m bos=true,false
       sinkexp measure outputs/export/my-run
       sinkexp measure EleutherAI/pythia-14m revision=step1000 n=100 seq_len=64
       sinkexp measure -m model=EleutherAI/pythia-14m,EleutherAI/pythia-70m revision=step1000,step143000 name=pythia"""
)


def parse(argv: list[str]) -> tuple[bool, list[dict]]:
    """(multirun, one {key: value} per job) from `[-m] [MODEL] [KEY=VALUE ...]`: each value as Hydra
    reads it (quotes and escapes removed; 3 an int, null None, true a bool), typed by the schema in
    measure_config. A key given twice (MODEL and model= too) is refused, as `sinkexp train` refuses it."""
    multirun = any(arg in ("-m", "--multirun") for arg in argv)
    args = [arg for arg in argv if arg not in ("-m", "--multirun")]
    bare = [arg for arg in args if "=" not in arg]
    if len(bare) > 1:
        raise ConfigError(f"one MODEL at a time ({', '.join(bare)}); sweep several with -m model=A,B")
    args = [f"model={arg}" if "=" not in arg else arg for arg in args]
    given_once(args)
    jobs = expand(args, multirun, params={}, command="sinkexp measure")
    return multirun, [{o.key_or_group: o.value() for o in parse_overrides(job)} for job in jobs]


def plan(argv: list[str]) -> tuple[bool, list[Measurement]]:
    """Every job of the command line, checked (ConfigError: one line naming the key)."""
    multirun, jobs = parse(argv)
    started = utc_stamp()
    planned: dict[Path, Measurement] = {}
    for values in jobs:
        job = plan_measurement(measure_config(values), multirun, started)
        planned.setdefault(job.run_dir, job)  # the same run named twice is measured once
    return multirun, list(planned.values())


def main(argv: list[str]) -> int:
    """0 when every run finished, 1 when one did not, 2 on bad input (nothing written)."""
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    try:
        multirun, jobs = plan(argv)
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    finished = [run_measurement(job) for job in jobs]
    if multirun and not all(finished):
        print(
            f"sinkexp: {finished.count(False)} of {len(jobs)} runs did not finish (see the lines above)",
            file=sys.stderr,
        )
    return 0 if all(finished) else 1
