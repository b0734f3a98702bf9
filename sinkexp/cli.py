"""The `sinkexp` command line.

    sinkexp train [-m] [--cfg job] [KEY=VALUE ...]   one run, or a Hydra multirun with -m
    sinkexp report DIR [--list]                       a table and figures for the runs below DIR (--list: a line each)
    sinkexp reproduce PAPER|all|--list [KEY=VALUE]    a paper's experiments and claims (sinkexp/reproduce/)
    sinkexp intervene RUN_DIR [--layer L]             causal interventions on a finished run (analysis/intervene.py)
    sinkexp measure [-m] MODEL [KEY=VALUE]            the same metrics on Hugging Face checkpoints (sinkexp/hf/)
    sinkexp export RUN_DIR [OUT]                      a finished model=llama run as a LlamaForCausalLM folder

`train` checks every override first (every combination of a sweep; jobs/plan.py), so a typo, a
wrong type or an impossible setting ends with one line naming the key and its valid choices, exit
code 2, and no directory written. Only then does Hydra run the job(s); the exit code is 1 when a
run did not finish. torch is imported only where needed, so `sinkexp --help` answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from omegaconf import OmegaConf

from sinkexp import __version__
from sinkexp.config.arguments import flags_of, options, repeated
from sinkexp.config.schedule import SCHEDULES
from sinkexp.config.schema import OPTIMIZERS, group_options
from sinkexp.config.settings import ExportConfig, InterveneConfig, MeasureConfig
from sinkexp.errors import ConfigError
from sinkexp.hf import require_transformers
from sinkexp.machine import preemption
from sinkexp.rundir.faults import marked

# torch (2.4 s to import), and the modules that import it (the model, launch, plan), are imported
# where they are needed, so that `sinkexp --help` and `--version` answer at once.

OPTIONS = """options:
  --version                  print the version
  -sc install=bash|zsh|fish  print a shell-completion script for sinkexp's commands and their keys
                             (eval "$(sinkexp -sc install=bash)")"""


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


def train_arguments() -> argparse.ArgumentParser:
    """`sinkexp train`'s flags, spelled as Hydra's app (`hydra.main`) spells them: what this command
    decides on (-m, and whether Hydra prints rather than trains); hydra_main reads the rest itself."""
    parser = argparse.ArgumentParser(prog="sinkexp train", add_help=False)
    parser.add_argument("overrides", nargs="*")
    for flags in (("-h", "--help"), ("--hydra-help",), ("-m", "--multirun"), ("-sc", "--shell-completion")):
        parser.add_argument(*flags, action="store_true")
    parser.add_argument("-r", "--run", action="store_true")
    parser.add_argument("--resolve", action="store_true")
    parser.add_argument("-c", "--cfg", choices=("job", "hydra", "all"))
    info = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
    parser.add_argument("-i", "--info", nargs="?", const="all", choices=info)
    for flags in (("-p", "--package"), ("-cp", "--config-path"), ("-cn", "--config-name"), ("-cd", "--config-dir")):
        parser.add_argument(*flags)
    parser.add_argument("--experimental-rerun")
    return parser


def train(argv: list[str]) -> int:
    """`sinkexp train`: plan (every job checked: one line and exit 2 on a bad value), then launch."""
    # lazy: launch and plan import torch
    from sinkexp.commands.overrides import read_sweep
    from sinkexp.config.compose import as_hydra_override
    from sinkexp.jobs.launch import hydra_main, launch
    from sinkexp.jobs.plan import plan

    preemption.stop_on_signals()  # torch is loaded: a signal now raises, for the run's boundary to mark it

    argv = [as_hydra_override(arg) for arg in argv]
    args = train_arguments().parse_args(argv)
    if args.multirun and (args.cfg or args.info):
        print(
            "sinkexp: error: -m cannot be combined with --cfg/--info; drop -m to print the composed config",
            file=sys.stderr,
        )
        return 2
    if args.help or args.hydra_help or args.info or args.shell_completion or args.cfg:
        for name, text in (("sinkexp_help_groups", help_groups), ("sinkexp_help_choices", help_choices)):
            OmegaConf.register_new_resolver(name, text, replace=True)
        # Shell completion registers itself for basename(argv[0]): the command, not "sinkexp train".
        hydra_main(argv, prog="sinkexp" if args.shell_completion else "sinkexp train")
        return 0
    try:
        planned = plan(read_sweep(args.overrides, args.multirun))  # read once, here; plan composes and checks
    except ConfigError as err:
        print(f"sinkexp: error: {err}", file=sys.stderr)
        return 2
    return launch(planned)


def complete(argv: list[str]) -> int:
    """`sinkexp -sc install=bash` / `query=bash`: completion of every command and its keys.

    The installed script (Hydra's) calls `sinkexp -sc query=bash` with the whole line in COMP_LINE:
    the command's name, then what its `Command.words` offer; after `train`, Hydra's completion
    of its overrides, the `train` word dropped from the line so that Hydra sees only the overrides.
    """
    line = os.environ.get("COMP_LINE")
    if line is not None:
        words = line.split()[1:]
        typed, current = (words, "") if line.endswith(" ") else (words[:-1], words[-1] if words else "")
        if not typed or typed[0] != "train":
            known = typed and typed[0] in COMMANDS
            offered = list(COMMANDS) if not typed else COMMANDS[typed[0]].words() if known else []
            print(" ".join(word for word in offered if word.startswith(current)))
            return 0
        os.environ["COMP_LINE"] = re.sub(r"^(\s*\S+)\s+train(?=\s|$)", r"\1", line)
    return train(argv)


def measure_words() -> list[str]:
    return ["-m", *(f"{field.name}=" for field in dataclasses.fields(MeasureConfig))]


def flags_from(schema: type, name: str) -> Callable[[], list[str]]:
    return lambda: options(flags_of(schema, f"sinkexp {name}", ""))


def parser_flags(module: str, named: Callable[[], list[str]] = list) -> Callable[[], list[str]]:
    return lambda: [*named(), *options(importlib.import_module(module).parser())]


def papers() -> list[str]:
    return list(importlib.import_module("sinkexp.reproduce.papers").PAPERS)


@dataclass(frozen=True)
class Command:
    """One command, declared once: what runs it, its line in `sinkexp --help`, and what completion
    offers after its name (train's: Hydra's own, from its config)."""

    module: str | None  # whose main(argv) runs it, imported only when it runs (None: train, here)
    summary: str
    words: Callable[[], list[str]] = list
    needs_transformers: bool = False  # the hf extra (sinkexp/hf/), checked before the module is imported
    loads_torch_later: bool = False  # reproduce: torch only when it trains or estimates (reproduce/run.py)


COMMANDS = {
    "train": Command(None, "train one model, or sweep with -m (sinkexp train --help lists the options)"),
    "report": Command(
        "sinkexp.report.runs",
        "collect the runs below a directory into summary.csv and figures (sinkexp report DIR; --list: one line each)",
        parser_flags("sinkexp.report.runs"),
    ),
    "reproduce": Command(
        "sinkexp.reproduce.command",
        "run a paper's experiments and check its claims (sinkexp reproduce PAPER|all|--list)",
        parser_flags("sinkexp.reproduce.command", papers),
        loads_torch_later=True,
    ),
    "intervene": Command(
        "sinkexp.analysis.intervene",
        "causal interventions on a finished run's sink (sinkexp intervene RUN_DIR [--layer L])",
        flags_from(InterveneConfig, "intervene"),
    ),
    "measure": Command(
        "sinkexp.commands.measure",
        "sinkexp's metrics on a Hugging Face causal LM (sinkexp measure MODEL; needs pip install -e .[hf])",
        measure_words,
        needs_transformers=True,
    ),
    "export": Command(
        "sinkexp.hf.export",
        "a finished model=llama run as a Hugging Face LlamaForCausalLM folder (sinkexp export RUN_DIR [OUT])",
        flags_from(ExportConfig, "export"),
        needs_transformers=True,
    ),
}
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
            print(f"sinkexp: error: {err}", file=sys.stderr)
            return 2
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
        print(f"sinkexp: error: unknown command {command!r}; choose one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    if repeated(rest):  # Hydra and argparse would each keep the last silently
        print(f"sinkexp: error: {repeated(rest)}", file=sys.stderr)
        return 2
    return train(rest) if command == "train" else run_command(COMMANDS[command], rest)


def main() -> None:
    """The command. Ctrl-C and SIGTERM end any command in one line, with exit status 128 + the
    signal (machine/preemption.py; a run's own stop says more: jobs/launch.py); the console script
    (sinkexp/__main__.py) has had them handled since its first instruction."""
    preemption.stop_on_signals(at_once=True)  # until the command's modules are loaded: nothing is written
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
        sys.stdout.flush()
        preemption.stop_on_signals(at_once="as the command ended (its work was done)")
    sys.exit(code)


if __name__ == "__main__":
    main()
