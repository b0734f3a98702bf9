"""How many torch threads a job uses (`threads=`): the user's number, or a choice from the cores
this process may use and how busy other processes keep them.

Why not torch's default (one thread per core): when another process holds a core, torch's
OpenMP threads wait on each other and a run can train several times slower than on one thread
(measured numbers in the README, "Speed"). So `threads=null` counts the cores the process may use
(its CPU affinity, e.g. a SLURM allocation), subtracts the cores other processes kept busy over a
short look at /proc/stat, and takes what is left (at least one). Under the parallel launcher every
job takes one thread, as the launcher runs one job per core.
"""

from __future__ import annotations

import os
import time


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(seconds: float = 0.3) -> float | None:
    """Cores kept busy by other processes over `seconds` (this process sleeps meanwhile)."""
    start = cpu_times()
    time.sleep(seconds)
    end = cpu_times()
    if start is None or end is None or end[1] == start[1]:
        return None
    return (end[0] - start[0]) / (end[1] - start[1]) * (os.cpu_count() or 1)


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity (e.g. a SLURM allocation), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def left_free(cores: int, busy: float) -> int:
    """Of `cores`, those that `busy` cores of other processes' work leave free (at least one)."""
    return max(1, min(cores, round(cores - busy)))


def free_cores() -> int:
    """The usable cores other processes leave free (all where the load is unknown)."""
    cores, busy = usable_cores(), busy_cores()
    return cores if busy is None else left_free(cores, busy)


def choose_threads(requested: int | None, parallel: bool) -> tuple[int, str]:
    """(threads, why) for a job; `requested` is the `threads=` setting."""
    if requested:
        return requested, "threads= as set"
    if parallel:
        return 1, "one per job under the parallel launcher"
    cores = usable_cores()
    busy = busy_cores()
    if busy is None:
        return cores, f"{cores} usable cores (load unknown)"
    return left_free(cores, busy), f"{cores} usable cores, {busy:.1f} busy with other processes"
