"""The `sinkexp` command line.

    sinkexp train [-m] [--cfg job] [KEY=VALUE ...]   one run, or a Hydra multirun with -m
    sinkexp report DIR [--list]                       a table and figures for the runs below DIR (--list: a line each)
    sinkexp reproduce PAPER|all|--list [KEY=VALUE]    a paper's experiments and claims (sinkexp/reproduce/)
    sinkexp intervene RUN_DIR [--layer L]             causal interventions on a finished run (analysis/intervene.py)
    sinkexp measure [-m] MODEL [KEY=VALUE]            the same metrics on Hugging Face checkpoints (sinkexp/hf/)
    sinkexp export RUN_DIR [OUT]                      a finished model=llama run as a LlamaForCausalLM folder

Each command is declared once, in sinkexp/commands/ (COMMANDS): its parser, usage line, --help and
completion are generated from that declaration (config/arguments.py, config/helptext.py).

`train` checks every override first (every combination of a sweep; jobs/plan.py), so a typo, a
wrong type or an impossible setting ends with one line naming the key and its valid choices, exit
code 2, and no directory written. Only then does Hydra run the job(s); the exit code is 1 when a
run did not finish. torch is imported only where needed, so `sinkexp --help` answers at once.
"""

from __future__ import annotations

import atexit
import importlib
import os
import re
import sys
import threading

from omegaconf import OmegaConf

from sinkexp import __version__
from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import Command, read
from sinkexp.config.helptext import help_text, words
from sinkexp.config.schedule import SCHEDULES
from sinkexp.config.schema import OPTIMIZERS, group_options
from sinkexp.config.settings import TrainFlags
from sinkexp.errors import ConfigError, refuse
from sinkexp.hf import require_transformers
from sinkexp.machine import preemption
from sinkexp.machine.console import READER_GONE, Console, guard_stdout
from sinkexp.rundir.faults import marked

# torch (2.4 s to import), and the modules that import it (the model, launch, plan), are imported
# where they are needed, so that `sinkexp --help` and `--version` answer at once.

OPTIONS = """options:
  --version                  print the version
  -sc install=bash|zsh|fish  print a shell-completion script for sinkexp's commands and their keys
                             (eval "$(sinkexp -sc install=bash)")"""


def help_header() -> str:
    """train's usage line, flags and examples, generated from its declaration as every command's are."""
    return help_text(COMMANDS["train"])


def help_groups() -> str:
    """`group: option, ...` for every user-facing config group (configs/<group>/*.yaml, the scales)."""
    lines = [f"{group}: {', '.join(options)}" for group, options in group_options().items()]
    lines.append("hydra/launcher: parallel, slurm, submitit_local (installed with the parallel / slurm extras)")
    return "\n".join(lines) + "\n"


def help_choices() -> str:
    """`key: choice, ...` for every key that names a registry entry (the model's AXES and the optimiser)."""
    from sinkexp.model import AXES  # lazy: the model imports torch

    choices = {**AXES, "train.optim": OPTIMIZERS, "train.schedule": SCHEDULES}
    return "".join(f"{key}: {', '.join(registry)}\n" for key, registry in choices.items())


def train(argv: list[str]) -> int:
    """`sinkexp train`: plan (every job checked: one line and exit 2 on a bad value), then launch."""
    # lazy: launch and plan import torch
    from sinkexp.commands.overrides import read_sweep
    from sinkexp.config.compose import as_hydra_override
    from sinkexp.jobs.launch import hydra_main, launch
    from sinkexp.jobs.plan import plan

    preemption.stop_on_signals()  # torch is loaded: a signal now raises, for the run's boundary to mark it

    argv = [as_hydra_override(arg) for arg in argv]
    try:
        given = read(COMMANDS["train"], argv)
    except ConfigError as err:
        return refuse(err)
    args = given.flags or TrainFlags()  # --help: Hydra's, nothing else read
    if given.multirun and (args.cfg or args.info):
        return refuse("-m cannot be combined with --cfg/--info; drop -m to print the composed config")
    if given.help or args.hydra_help or args.info or args.shell_completion or args.cfg:
        resolvers = (help_header, help_groups, help_choices)  # what train's help template (configs/config.yaml) asks
        for name, text in ((f"sinkexp_{resolver.__name__}", resolver) for resolver in resolvers):
            OmegaConf.register_new_resolver(name, text, replace=True)
        # Shell completion registers itself for basename(argv[0]): the command, not "sinkexp train".
        hydra_main(argv, prog="sinkexp" if args.shell_completion else "sinkexp train")
        return 0
    try:
        planned = plan(read_sweep(given.keys, given.multirun))  # read once, here; plan composes and checks
    except ConfigError as err:
        return refuse(err)
    return launch(planned)


def complete(argv: list[str]) -> int:
    """`sinkexp -sc install=bash` / `query=bash`: completion of every command and its keys.

    The installed script (Hydra's) calls `sinkexp -sc query=bash` with the whole line in COMP_LINE:
    the command's name, then what its declaration offers (config/helptext.py words); after `train`, Hydra's completion
    of its overrides, the `train` word dropped from the line so that Hydra sees only the overrides.
    """
    line = os.environ.get("COMP_LINE")
    if line is not None:
        said = line.split()[1:]
        typed, current = (said, "") if line.endswith(" ") else (said[:-1], said[-1] if said else "")
        if not typed or typed[0] != "train":
            known = typed and typed[0] in COMMANDS
            offered = list(COMMANDS) if not typed else words(COMMANDS[typed[0]]) if known else []
            print(" ".join(word for word in offered if word.startswith(current)))
            return 0
        os.environ["COMP_LINE"] = re.sub(r"^(\s*\S+)\s+train(?=\s|$)", r"\1", line)
    return train(argv)


USAGE = "\n".join(
    ["usage: sinkexp <command> [args]", "commands:", *(f"  {name:<10} {c.summary}" for name, c in COMMANDS.items())]
    + [OPTIONS]
)


def run_command(command: Command, argv: list[str]) -> int:
    """The command's `main(argv)`; `measure` and `export` first check for the optional transformers."""
    if command.needs_transformers:
        try:
            require_transformers()
        except ConfigError as err:
            return refuse(err)
    module = importlib.import_module(command.module)
    if not command.loads_torch_later:
        preemption.stop_on_signals()  # its modules are loaded: a signal now raises, for its own boundary
    return module.main(argv)


def invoke(argv: list[str]) -> int:
    """The command `sinkexp ARGV...`; returns its exit status (0 done, 1 a run or claim failed, 2 bad input)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"sinkexp {__version__}")
        return 0
    if argv[0] in ("-sc", "--shell-completion"):
        return complete(argv)
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        return refuse(f"unknown command {command!r}; choose one of: {', '.join(COMMANDS)}")
    return train(rest) if command == "train" else run_command(COMMANDS[command], rest)


def main() -> None:
    """The command. Ctrl-C and SIGTERM end any command in one line, with exit status 128 + the
    signal (machine/preemption.py; a run's own stop says more: jobs/launch.py); the console script
    (sinkexp/__main__.py) has had them handled since its first instruction."""
    preemption.stop_on_signals(at_once=True)  # until the command's modules are loaded: nothing is written
    console = guard_stdout()  # its reader may go: `sinkexp reproduce --list | head -3`
    try:
        code = invoke(sys.argv[1:])
    except BaseException as err:  # a stop outside a run's own boundary: planning, measure, report, ...
        if isinstance(err, SystemExit) or preemption.stopping() is None:
            raise
        stop = preemption.Interrupted.at(err) if isinstance(err, KeyboardInterrupt) else None
        signum = stop.signum if stop else preemption.stopping()
        print(
            f"sinkexp: {stop or preemption.Interrupted(signum)} ({marked(err)}); the same command starts again, "
            "keeping what finished",
            file=sys.stderr,
        )
        code = 128 + signum
    else:
        if preemption.stopping() is not None:  # its exception lost in a finaliser, after the last check
            stop = preemption.Interrupted(preemption.stopping())
            print(f"sinkexp: {stop}; the command had finished its work first", file=sys.stderr)
            code = 128 + preemption.stopping()
    if preemption.stopping() is None:  # its work done: a signal from here on ends the process at once
        preemption.stop_on_signals(at_once="as the command ended (its work was done)")
        exit_now(code, console)
    sys.exit(code)


def exit_now(code: int, console: Console) -> None:
    """End the process with `code` (141 where it was 0 and stdout's reader went away: machine/console.py)
    as Python would end it, up to its teardown of its modules: non-daemon threads joined and the
    callbacks registered with threading (loky's and concurrent.futures' pools shut down), then the
    atexit functions (logging's; multiprocessing's, which joins the pools' workers), the standard
    streams flushed. The teardown, skipped, takes 0.3 s with torch loaded, and Python restores the
    signals' default actions before it, so a Ctrl-C there would end the finished command silently
    instead of in cli.main's one line."""
    threading._shutdown()  # as Python ends: its non-daemon threads joined, then a pool's own shutdown (loky's)
    atexit._run_exitfuncs()
    console.flush()
    sys.stderr.flush()
    os._exit(READER_GONE if console.gone and code == 0 else code)


if __name__ == "__main__":
    main()
