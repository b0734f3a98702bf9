"""`sinkexp reproduce PAPER|all|--list [KEY=VALUE ...] [--docs DIR]`: run a paper's experiments,
check its claims.

A paper is one file in papers/ holding a `Paper` in the vocabulary of declare.py (experiments,
claims of three kinds, criteria) and measures.py. The command works in these rooms, one module each:

    command.py   the command line (one argument parser), decided once into ReproduceSettings
    sweeps.py    each experiment's overrides read once into its Sweep (the command layer's reading)
    run.py       `reproduce()`: plan, run, judge, write
    declare.py   what a paper may say (claims.py: claims and criteria); references are checked on import
    execute.py   every job planned (checked) once, first; with a launcher, each experiment's sweep run through it
    pool.py      every planned job of every experiment through one pool of processes, one progress line
    estimate.py  --estimate: the planned jobs, their FLOPs and a predicted wall time (calibration.py: the timings)
    verdicts.py  each claim's value on every run it selects, and its verdict
    write.py     claims.csv, REPORT.md, figures, and with --docs the results page and README headline

docs/reproduce.md describes the files and the verdict.
"""

from sinkexp.config.settings import OUTPUT_ROOT
from sinkexp.reproduce.command import last_verdicts, list_papers, main
from sinkexp.reproduce.run import estimate_papers, exit_code, reproduce

__all__ = ["OUTPUT_ROOT", "estimate_papers", "exit_code", "last_verdicts", "list_papers", "main", "reproduce"]
