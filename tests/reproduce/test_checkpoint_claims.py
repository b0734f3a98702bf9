"""Claims on named open checkpoints (reproduce/checkpoints.py): measured where the weights are,
with the untrained revision beside them, and "not run" with the reason where they are not.
Tiny randomly initialised GPT-2s stand in for the papers' models (no download)."""

import pytest

pytest.importorskip("transformers")

from hf_models import sink_at_position_zero, tiny  # noqa: E402

from sinkexp.reproduce import exit_code, reproduce  # noqa: E402
from sinkexp.reproduce.command import decided  # noqa: E402
from sinkexp.reproduce.declare import Checkpoint, Paper, Value, at_least, at_most  # noqa: E402
from sinkexp.reproduce.measures import final  # noqa: E402

RATE = final("sink_rate@0.3", -1)
TINY = Checkpoint(name="tiny", model="org/tiny", untrained="step0", settings={"n": 8, "seq_len": 16})


def paper() -> Paper:
    claim = dict(kind="paper", statement="-", source="-", paper_value="-", experiment="tiny", measure=RATE)
    return Paper(
        name="open",
        title="a tiny checkpoint",
        experiments=(TINY,),
        claims=(
            Value(name="sinks", criterion=at_least(0.5), forms=True, **claim),
            Value(name="at_most_all", criterion=at_most(1.0), **claim),
            Value(name="on_its_premise", criterion=at_most(1.0), requires="sinks", **claim),
        ),
    )


def test_a_checkpoint_on_this_machine_is_measured_and_judged_beside_its_untrained_revision(tmp_path):
    weights = tmp_path / "weights"
    tiny("gpt2", weights / "org" / "tiny", edit=sink_at_position_zero)  # every head on position 0
    tiny("gpt2", weights / "org" / "tiny@step0", seed=1)  # untrained: no sink
    rows = reproduce(decided([f"weights={weights}"], [paper()], root=tmp_path / "out")).set_index("claim")
    assert rows.loc["sinks", "values"] == "run=1" and rows.loc["sinks", "verdict"] == "holds"
    assert float(rows.loc["sinks", "untrained"].removeprefix("run=")) < 0.5  # the untrained revision's
    # a criterion the untrained revision meets too tests nothing
    assert rows.loc["at_most_all", "verdict"] == "cannot fail"
    assert (tmp_path / "out" / "open" / "tiny" / "untrained" / "DONE").exists()


def test_a_checkpoint_whose_weights_are_not_here_is_not_run_and_says_why(tmp_path):
    rows = reproduce(decided([f"weights={tmp_path / 'nowhere'}"], [paper()], root=tmp_path / "out"))
    assert set(rows["verdict"]) == {"not run"}
    assert rows["why"].str.startswith("needs the weights of org/tiny").all()
    assert rows.set_index("claim").loc["on_its_premise", "why"].endswith("(for its premise sinks)")
    assert exit_code(rows) == 0  # nothing ran, nothing went wrong
    assert exit_code(rows.assign(why="no selected run")) == 1  # not run for another reason: a defect


def test_a_checkpoint_with_draws_is_measured_per_draw_beside_its_random_initialisation(tmp_path, capsys):
    """Two texts x two windows, each against the same draw on the architecture at random init
    (untrained=INIT); a second paper reading the same measurements copies them, measuring nothing."""
    import pandas as pd

    from sinkexp.reproduce.experiment import INIT
    from sinkexp.rundir.reading import RunFiles

    weights = tmp_path / "weights"
    tiny("gpt2", weights / "org" / "tiny", edit=sink_at_position_zero)
    draws = tuple({"text": text, "skip": skip} for text in ("kjv", "argparse") for skip in (0, 200))
    drawn = Checkpoint(
        name="drawn", model="org/tiny", untrained=INIT, seed=3, settings={"n": 4, "seq_len": 16}, draws=draws
    )
    claim = dict(kind="paper", statement="-", source="-", paper_value="-", experiment="drawn", measure=RATE)
    papers = [
        Paper(
            name=name,
            title="t",
            experiments=(drawn,),
            claims=(Value(name="sinks", criterion=at_least(0.5), forms=True, **claim),),
        )
        for name in ("first", "second")
    ]
    rows = reproduce(decided([f"weights={weights}"], papers[:1], root=tmp_path / "out")).set_index("claim")
    labels = ["kjv@0", "kjv@200", "argparse@0", "argparse@200"]
    assert rows.loc["sinks", "values"] == " ".join(f"{label}=1" for label in sorted(labels))
    assert rows.loc["sinks", "verdict"] == "holds" and rows.loc["sinks", "model"] == "org/tiny"
    untrained = {label: float(value) for label, value in (v.split("=") for v in rows.loc["sinks", "untrained"].split())}
    assert set(untrained) == set(labels) and max(untrained.values()) < 0.5  # no sink at random initialisation
    folder = tmp_path / "out" / "first" / "drawn"
    config = RunFiles(folder / "untrained" / "argparse@200").config
    assert (config["init"], config["skip"], config["text"]) == (3, 200, "argparse")
    capsys.readouterr()
    again = reproduce(decided([f"weights={weights}"], papers[1:], root=tmp_path / "out")).set_index("claim")
    assert again.loc["sinks", "values"] == rows.loc["sinks", "values"]
    assert capsys.readouterr().out.count("copied, not measured again") == 2 * len(labels)
    assert pd.read_csv(tmp_path / "out" / "second" / "claims.csv")["model"].tolist() == ["org/tiny"]


def test_a_scale_that_judges_no_claim_of_the_papers_is_refused(tmp_path):
    from sinkexp.errors import ConfigError
    from sinkexp.reproduce.papers import PAPERS

    with pytest.raises(ConfigError, match="scale=pretrained: ladder judge no claim at this scale"):
        reproduce(decided(["scale=pretrained"], [PAPERS["ladder"]], root=tmp_path))
