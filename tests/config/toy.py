"""A hand-built command declaration, of every kind of argument, flag and key a declaration can have,
for the tests of what is generated from it (test_arguments.py, test_helptext.py)."""

from dataclasses import dataclass
from typing import List, Optional

from sinkexp.config.arguments import Command
from sinkexp.config.settings import about


@dataclass
class Flags:
    run: str = about("a run", metavar="RUN", positional=True)
    layer: Optional[List[int]] = about("layers", None, metavar="L")
    dpi: int = about("pixels", 120, metavar="N")
    pack: Optional[bool] = about("pack", None, negatable=True)
    info: Optional[str] = about("print", None, short=("-i",), choices=("all", "config"), const="all")
    old: bool = about("an old name", False, hidden=True)
    rare: bool = about("in --help only", False, usage=False)


@dataclass
class Keys:
    model: Optional[str] = about("a model", None, positional=True, metavar="MODEL")
    n: int = about("sequences", 100)
    perturb: bool = about("perturbed too", False)


TOY = Command(
    "toy",
    "a toy",
    "A toy command.",
    flags=Flags,
    keys=Keys,
    sweeps=True,
    examples=("sinkexp toy R", "sinkexp toy -m R n=1,2"),
    choices=lambda: ["a", "b"],
)
