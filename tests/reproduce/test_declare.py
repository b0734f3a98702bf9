"""A paper's declaration is checked when it is made: every reference it names must exist, and a
mistake is one line naming the paper, the claim (or experiment) and the key, before anything trains."""

import dataclasses
import re
from pathlib import Path

import pytest

from sinkexp.config import schema
from sinkexp.config.typed import config_keys
from sinkexp.evaluate.tables import METRICS
from sinkexp.reproduce.declare import (
    DeclarationError,
    Experiment,
    Paired,
    Paper,
    Trend,
    Value,
    at_least,
    override_value,
)
from sinkexp.reproduce.measures import final
from sinkexp.tasks import TASKS

ONE = Experiment(
    name="one",
    overrides={"task": "damping"},
    grid={"task.gamma": (0.0, 0.1), "seed": (0, 1, 2), "task.structure_seed": (0, 1)},
)
OTHER = Experiment(name="other", overrides={"task": "damping", "attn": "gated"}, grid={"seed": (0, 1, 2)})


def declare(*claims, experiments=(ONE, OTHER)) -> Paper:
    return Paper(name="p", title="-", experiments=experiments, claims=claims)


def value(**fields) -> Value:
    chosen = {
        "name": "c",
        "kind": "paper",
        "statement": "-",
        "source": "-",
        "paper_value": "-",
        "experiment": "one",
        "measure": final("sink_attn", 0, "nop"),
        "criterion": at_least(0.9),
        **fields,
    }
    return Value(**chosen)


def test_a_sound_declaration_is_accepted():
    paper = declare(
        value(where={"task.gamma": 0.0}),
        Paired(
            name="d",
            kind="paper",
            statement="-",
            source="-",
            paper_value="-",
            experiment="other",
            measure=final("gate", 0, "nop"),
            criterion=at_least(0),
            against={"task.gamma": 0.0},
            against_in="one",
        ),
    )
    assert [c.name for c in paper.claims] == ["c", "d"]


def test_the_fields_naming_other_claims_read_as_tuples_of_names():
    """requires, reached and contrast take one name, several or none; each reads as a tuple once made."""
    claim = value(requires="a", reached=("b", "c"), contrast="", forms=True)
    assert (claim.requires, claim.reached, claim.contrast) == (("a",), ("b", "c"), ())
    assert dataclasses.replace(claim, contrast="d").contrast == ("d",) and value().requires == ()


@pytest.mark.parametrize(
    "claim,says",
    [
        (value(experiment="nope"), "p/c: experiment 'nope' is not declared; experiments: one, other"),
        (value(kind="claim"), "p/c: kind='claim'; choose one of: paper, extension, control"),
        (value(requires="later"), "p/c: requires='later' is not an earlier claim; earlier: "),
        (value(measure=final("sink_atn", 0)), "p/c: metric 'sink_atn' is not in the registry"),
        (
            value(where={"task.gama": 0.0}),
            "p/c: task.gama: unknown key for task=damping (did you mean task.gamma?); valid keys under 'task': ",
        ),
        (value(where={"task.gamma": 0.5}), "p/c: task.gamma=0.5 is not a value its experiments run (one: 0.0, 0.1)"),
        (value(where={"task.gamma": "high"}), "p/c: task.gamma='high' does not fit the key"),
        (
            value(experiment="other", where={"attn.name": "softmax"}),
            "p/c: attn.name=softmax is not a value its experiments run (other: gated)",
        ),
        (
            Paired(
                name="c",
                kind="paper",
                statement="-",
                source="-",
                paper_value="-",
                experiment="one",
                measure=final("gate", 0),
                criterion=at_least(0),
                against={"seed": 0},
                compare="quotient",
            ),
            "p/c: compare='quotient'",
        ),
        (
            Trend(
                name="c",
                kind="paper",
                statement="-",
                source="-",
                paper_value="-",
                experiment="one",
                measure=final("gate", 0),
                criterion=at_least(0),
                key="task.gamma",
            ),
            "p/c: trend key task.gamma takes fewer than 3 values in one",
        ),
        (
            Trend(
                name="c",
                kind="paper",
                statement="-",
                source="-",
                paper_value="-",
                experiment="one",
                measure=final("gate", 0),
                criterion=at_least(0),
                key="train.lrr",
            ),
            "p/c: train.lrr: unknown key",
        ),
    ],
)
def test_a_claims_broken_reference_is_one_line_naming_the_claim_and_the_key(claim, says):
    with pytest.raises(DeclarationError) as err:
        declare(claim)
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "experiment,says",
    [
        (
            Experiment(name="e", overrides={"attn": "sofmax"}),
            "p/e: attn='sofmax' is not valid (did you mean softmax?); choose one of: gated,",
        ),
        (Experiment(name="e", grid={"model.n_layer": (1, 2)}), "p/e: model.n_layer: unknown key for task=trigger"),
        (Experiment(name="e", cpu={"train.steps": "many"}), "p/e: train.steps='many' does not fit the key"),
        (
            Experiment(name="e", overrides={"task": "backcopy"}, grid={"task.gamma": (0.1,)}),
            "p/e: task.gamma: unknown key for task=backcopy",
        ),
    ],
)
def test_an_experiments_unknown_key_or_option_is_refused(experiment, says):
    with pytest.raises(DeclarationError, match="^" + re.escape(says)):
        declare(experiments=(experiment,))


def test_names_are_unique():
    with pytest.raises(DeclarationError, match="p/one: two experiments share this name"):
        declare(experiments=(ONE, ONE))
    with pytest.raises(DeclarationError, match="p/c: two claims share this name"):
        declare(value(), value())


@pytest.mark.parametrize("option,task", [("trigger", "trigger"), ("damping_dynamics", "damping"), ("lm", "lm")])
def test_a_task_options_keys_are_its_tasks_schema(option, task):
    """A task option's keys come from the dataclass its file names (damping_dynamics: damping's)."""
    assert {key for key in config_keys(option) if key.startswith("task.")} == {
        f"task.{f.name}" for f in dataclasses.fields(TASKS[task].Config)
    }
    assert config_keys(option)["model.n_layers"] == schema.ModelConfig().n_layers
    assert config_keys(option)["train.betas"] == schema.TrainConfig().betas


def test_grids_expand_to_the_sweeps_hydra_reads_and_cpu_sizes_go_with_scale_cpu_only():
    exp = Experiment(
        name="e",
        overrides={"task": "trigger", "model.hide_bos": True},
        grid={"attn": ("softmax", "relu"), "train.bos_penalty": (0.1, 1.0)},
        cpu={"train.steps": 1000},
    )
    assert exp.argv() == [
        "task=trigger",
        "model.hide_bos=true",
        "train.steps=1000",
        "attn=softmax,relu",
        "train.bos_penalty=0.1,1.0",
    ]
    assert "train.steps=1000" not in exp.argv(scale="paper") and exp.runs == 4
    assert [override_value(v) for v in (None, False, 0.0001, "x")] == ["null", "false", "0.0001", "x"]


def test_every_registered_metric_is_documented():
    text = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    spelled = [m for m in METRICS if not re.fullmatch(r"qk_sigma\d|loss_\w+", m)]  # docs: `qk_sigma1..3`, `eval/<t>`
    assert [m for m in spelled if f"`{m}`" not in text] == []


def test_an_unknown_task_is_named_before_its_keys_are_looked_up():
    exp = Experiment(name="e", overrides={"task.gamma": 0.1, "task": "dampnig"})
    with pytest.raises(
        DeclarationError,
        match=r"^p/e: task='dampnig' is not valid \(did you mean damping\?\); choose one of: backcopy,",
    ):
        declare(experiments=(exp,))


def test_a_contrast_on_other_runs_or_another_quantity_is_refused():
    """A contrast stands in for a claim's check that it could fail only where it reads the same
    quantity (a measure family they share) on runs like the claim's (same task, same sizes)."""
    trigger = Experiment(name="trigger", overrides={"task": "trigger"}, grid={"seed": (0, 1, 2)})
    longer = Experiment(name="longer", overrides={"task": "damping"}, grid={"seed": (0, 1, 2)}, cpu={"train.steps": 9})
    sinks = value(name="sinks", experiment="trigger", measure=final("sink_attn", 0, "non_trigger"))
    with pytest.raises(DeclarationError) as err:
        declare(sinks, value(contrast="sinks"), experiments=(ONE, trigger))
    assert str(err.value) == (
        "p/c: contrast='sinks' reads trigger, not runs like this claim's (one: the same task at the same sizes)"
    )
    longer_sinks = value(name="sinks", experiment="longer", measure=final("sink_attn", 0))
    with pytest.raises(DeclarationError, match="reads longer, not runs like this claim's"):
        declare(longer_sinks, value(contrast="sinks"), experiments=(ONE, longer))
    rank = value(name="rank", measure=final("stable_rank", 0))
    with pytest.raises(DeclarationError) as err:
        declare(rank, value(contrast="rank"))
    assert str(err.value) == (
        "p/c: contrast='rank' measures stable_rank, not this claim's sink_attn; a contrast reads the same quantity"
    )
    declare(value(name="sinks"), value(contrast="sinks", measure=final("sink_attn", 0, "active")))  # accepted
    # reach sizes count where the claim is judged at reach, and only there
    grown = dataclasses.replace(trigger, name="grown", reach={"train.steps": 9})
    on_grown = value(name="sinks", experiment="grown", measure=final("sink_attn", 0, "non_trigger"))
    declare(on_grown, value(contrast="sinks", experiment="trigger"), experiments=(trigger, grown))  # accepted
    with pytest.raises(DeclarationError, match="reads trigger, not runs like this claim's"):
        declare(sinks, value(contrast="sinks", experiment="grown"), experiments=(trigger, grown))


def test_a_criterion_says_whose_threshold_it_is():
    with pytest.raises(DeclarationError) as err:
        declare(value(criterion=at_least(0.9, by="mine")))
    assert str(err.value) == "p/c: criterion by='mine'; choose one of: sinkexp, source, direction"


def test_a_reach_size_for_a_key_the_task_lacks_is_refused():
    bad = Experiment(
        name="one", overrides={"task": "damping"}, grid={"seed": (0, 1, 2)}, reach={"task.bigram_table": "x"}
    )
    with pytest.raises(DeclarationError) as err:
        declare(value(), experiments=(bad,))
    assert str(err.value).startswith("p/one: task.bigram_table: unknown key for task=damping (did you mean")
    assert "valid keys under 'task': task.centred, " in str(err.value)
    assert "\n" not in str(err.value)
