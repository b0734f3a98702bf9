"""`sinkexp measure [-m] [MODEL] [KEY=VALUE ...]`: the command line read once, with Hydra's override
grammar and sweep order as `sinkexp train` reads its own (config/compose.py), into one checked
MeasureConfig per job (config/settings.py), each planned and then measured by hf/runner.py.

A problem with the command line or a job (an unknown key, a key given twice, a model that is not
there) is one line and exit code 2, with nothing written.
"""

from __future__ import annotations

from pathlib import Path

from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import Given, read
from sinkexp.config.compose import expand
from sinkexp.config.compose import parse as parse_overrides
from sinkexp.config.helptext import help_text
from sinkexp.config.settings import measure_config
from sinkexp.errors import ConfigError, refuse
from sinkexp.hf.identity import sweep_folder
from sinkexp.hf.runner import Measurement, plan_measurement, run_measurement, utc_stamp
from sinkexp.jobs.launch import job_header, sweep_ended

MEASURE = COMMANDS["measure"]  # its usage, --help and keys: from MeasureConfig (config/settings.py)


def parse(argv: list[str]) -> tuple[bool, list[list[str]]]:
    """(multirun, each job's overrides) from `[-m] [MODEL] [KEY=VALUE ...]`, read by measure's
    declaration (a key given twice, MODEL and model= too, refused as `sinkexp train` refuses it) and
    expanded as `sinkexp train` expands its own (Hydra's grammar and sweep order)."""
    return jobs_of(read(MEASURE, argv))


def jobs_of(given: Given) -> tuple[bool, list[list[str]]]:
    return given.multirun, expand(given.keys, given.multirun, params={}, command="sinkexp measure")


def values(job: list[str]) -> dict:
    """A job's {key: value}, each value as Hydra reads it (quotes and escapes removed; 3 an int, null
    None, true a bool), for the schema to type (measure_config)."""
    return {override.key_or_group: override.value() for override in parse_overrides(job)}


def measurements(argv: list[str], started: str) -> tuple[bool, list[tuple[list[str], Measurement]]]:
    return planned(read(MEASURE, argv), started)


def planned(given: Given, started: str) -> tuple[bool, list[tuple[list[str], Measurement]]]:
    """Every job of the command line (its overrides and its measurement), checked (ConfigError: one
    line naming the key); the same run named twice is measured once. `started`: the UTC time that
    names a run or sweep folder not given by dir= or name=."""
    multirun, jobs = jobs_of(given)
    planned: dict[Path, tuple[list[str], Measurement]] = {}
    for job in jobs:
        measurement = plan_measurement(measure_config(values(job)), multirun, started)
        planned.setdefault(measurement.run_dir, (job, measurement))
    return multirun, list(planned.values())


def main(argv: list[str]) -> int:
    """0 when every run finished, 1 when one did not, 2 on bad input (nothing written). A sweep's
    jobs each under a header, and its closing line, as `sinkexp train -m` prints them."""
    try:
        given = read(MEASURE, argv)
        if given.help:
            print(help_text(MEASURE))
            return 0
        started = utc_stamp()
        multirun, jobs = planned(given, started)
    except ConfigError as err:
        return refuse(err)
    unfinished = []
    for number, (overrides, job) in enumerate(jobs):
        if multirun:
            print(job_header(number, overrides), flush=True)
        if not run_measurement(job):
            unfinished.append(job.run_dir)
    if multirun:
        sweep_ended(unfinished, len(jobs), sweep_folder(jobs[0][1].cfg, started))
    return 1 if unfinished else 0
