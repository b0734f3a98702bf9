"""The plumbing paper: a tiny trigger experiment (softmax and ReLU, two seeds, a few seconds a run)
whose claims exercise reproduce end to end (the `plumbed` fixture in conftest.py runs it once)."""

from conftest import QUICK

from sinkexp.reproduce.declare import Experiment, Paired, Paper, Value, at_least, between
from sinkexp.reproduce.measures import final

QUICK_SIZES = {key: int(value) if value.isdigit() else value for key, value in (o.split("=", 1) for o in QUICK)}


def claim(kind=Value, name="c", experiment="tiny", where=None, **fields):
    """A claim for plumbing tests: only what the test is about named."""
    return kind(
        name=name,
        kind="paper",
        statement="-",
        source="-",
        paper_value="-",
        experiment=experiment,
        where=where or {},
        **fields,
    )


def plumbing_paper():
    tiny = Experiment(
        name="tiny", overrides={"task": "trigger", **QUICK_SIZES}, grid={"attn": ("softmax", "relu"), "seed": (0, 1)}
    )
    bos = final("sink_attn", 0, "non_trigger")
    softmax = {"attn.name": "softmax"}
    return Paper(
        name="plumbing",
        title="a tiny case",
        experiments=(tiny,),
        claims=(
            claim(name="possible", where=softmax, measure=bos, criterion=between(0, 1)),
            claim(name="impossible", where=softmax, measure=bos, criterion=at_least(1.5)),
            claim(
                Paired,
                name="paired",
                where=softmax,
                measure=bos,
                criterion=between(-1, 1),
                against={"attn.name": "relu"},
            ),
        ),
    )
