"""The verdicts (reproduce/verdicts.py), on hand-built runs whose trained and untrained (step 0)
values are set by hand: holds, contradicted, not reached, cannot fail, not run."""

import pandas as pd
import pytest
from hand_built import SEEDS, VALUE, claim, curve_run, runs, verdicts

from sinkexp.reproduce.declare import Condition, DeclarationError, Experiment, Measure, Paper, Value, at_least, at_most
from sinkexp.reproduce.judge import judge
from sinkexp.reproduce.verdicts import check_claims
from sinkexp.reproduce.write import counted, passing


def test_a_claim_that_also_holds_untrained_cannot_fail_unless_a_contrast_shows_training_did_it():
    sinks = claim("softmax_sinks", "softmax", at_least(0.9))
    no_sink = claim("relu_no_sink", "relu", at_most(0.1))
    no_sink_beside = claim("relu_no_sink_beside", "relu", at_most(0.1), contrast="softmax_sinks")
    got = verdicts([sinks, no_sink, no_sink_beside], {"softmax": (0.99, 0.10), "relu": (0.02, 0.03)})
    assert got["softmax_sinks"][0] == "holds"  # 0.99 trained, 0.10 untrained: training did it
    assert got["relu_no_sink"] == ("cannot fail", "its criterion holds on the untrained model too (step 0)")
    assert got["relu_no_sink_beside"][0] == "holds" and "softmax_sinks" in got["relu_no_sink_beside"][1]
    # a contrast that did not form does not help: the no-sink claim still tests nothing
    got = verdicts([sinks, no_sink_beside], {"softmax": (0.3, 0.10), "relu": (0.02, 0.03)})
    assert got["softmax_sinks"][0] == "contradicted" and got["relu_no_sink_beside"][0] == "cannot fail"


def test_a_claim_that_a_phenomenon_forms_is_not_reached_without_evidence_the_size_sufficed():
    """Without `reached` evidence a phenomenon absent on every run is not reached, even where a
    premise holds (the size a premise holds at says nothing of this arm's: test_reach_evidence.py)."""
    control = claim("control_sinks", "softmax", at_least(0.9))
    forms = claim("arm_sinks", "other", at_least(0.9), forms=True)
    premised = claim("arm_sinks_premised", "other", at_least(0.9), forms=True, requires="control_sinks")
    routed = claim("arm_sinks_routed", "other", at_least(0.9), forms=True, route="first_position")
    got = verdicts([control, forms, premised, routed], {"softmax": (0.99, 0.1), "other": (0.2, 0.1)})
    runs_missed = "misses it on s0 (0.2), s1 (0.2), s2 (0.2)"
    assert got["arm_sinks"] == (
        "not reached",
        f"it did not form at the size run; nothing here tells too small from absent; {runs_missed}",
    )
    assert got["arm_sinks_premised"] == got["arm_sinks"]
    assert got["arm_sinks_routed"] == (
        "not reached",
        "it did not form at the size run, and no earlier claim of its route (first_position) shows the size "
        f"sufficed; nothing here tells too small from absent; {runs_missed}",
    )
    got = verdicts([control], {"softmax": (0.5, 0.1)})  # not a `forms` claim: the runs that miss it say so
    assert got["control_sinks"] == ("contradicted", "misses it on s0 (0.5), s1 (0.5), s2 (0.5)")


def test_a_phenomenon_that_formed_on_some_runs_or_at_an_earlier_step_is_contradicted_where_it_misses():
    """Partial failures count the same for every kind: a `forms` claim that holds on some runs is
    contradicted by the others, and a run that met it and lost it by the end is said as such."""
    solves = claim("solves", "curve", at_most(0.1), forms=True)
    collapses = {0: 1.0, 100: 0.5, 200: 0.05, 300: 0.99}
    runs_ = [curve_run(0, collapses), curve_run(1, {0: 1.0, 300: 0.02}), curve_run(2, {0: 1.0, 300: 0.03})]
    got = verdicts([solves], {}, extra=runs_)["solves"]
    assert got == ("contradicted", "formed on 2 of 3; misses it on s0 (0.99, met at step 200: 0.05)")
    runs_ = [curve_run(seed, collapses) for seed in SEEDS]  # every run solved, then collapsed
    assert verdicts([solves], {}, extra=runs_)["solves"][1].startswith("formed, then was lost; misses it on s0")


def test_a_claim_whose_premise_did_not_hold_is_not_reached_and_a_missing_run_is_not_run():
    spike = claim("spike", "pre", at_least(100), forms=True)
    lowers = claim("lowers", "sandwich", at_most(0), requires="spike")
    got = verdicts([spike, lowers], {"pre": (10, 7), "sandwich": (-3, 0)})
    assert got["spike"][0] == "not reached" and got["lowers"] == ("not reached", "its premise spike was not reached")
    missing = claim("missing", "nowhere", at_least(0))
    assert verdicts([missing], {"pre": (1, 1)})["missing"] == ("not run", "no run selected")
    after_missing = claim("after_missing", "pre", at_least(0), requires="missing")
    assert verdicts([missing, after_missing], {"pre": (1, 1)})["after_missing"] == (
        "not run",
        "no run selected (for its premise missing)",
    )
    solved = Condition(VALUE, at_most(0.0))
    unsolved = claim("among_solved", "pre", at_least(0), among=solved)
    assert verdicts([unsolved], {"pre": (1, 1)})["among_solved"][0] == "not reached"


def test_the_untrained_values_are_the_runs_step_0_and_counted_apart_by_kind():
    sinks = claim("sinks", "softmax", at_least(0.9))
    all_runs = runs("softmax", 0.99, 0.12)
    table = pd.DataFrame({"run": [str(r.path) for r in all_runs], "status": "done", "arm": "softmax"})
    result = judge(sinks, all_runs, table)
    assert result.values == dict.fromkeys(("s0", "s1", "s2"), 0.99)
    assert result.initial == dict.fromkeys(("s0", "s1", "s2"), 0.12)
    assert result.passed and result.passed_initially is False
    rows = pd.DataFrame(
        {
            "kind": ["paper"] * 5 + ["extension"],
            "verdict": ["holds", "holds", "contradicted", "not reached", "cannot fail", "holds"],
        }
    )
    assert counted(rows[rows["kind"] == "paper"]) == "2 hold, 1 contradicted, 1 not reached, 1 cannot fail"
    assert passing(rows) == (
        "paper claims: 2 hold, 1 contradicted, 1 not reached, 1 cannot fail; "
        "extensions: 1 hold, 0 contradicted, 0 not reached, 0 cannot fail"
    )


@pytest.mark.parametrize(
    "fields,says",
    [
        ({"contrast": "nope"}, "contrast='nope' is not an earlier claim"),
        ({"reached": "first", "forms": False}, "reached= is for a claim that a phenomenon forms"),
        ({"requires": "later"}, "requires='later' is not an earlier claim"),
    ],
)
def test_a_declaration_naming_a_claim_that_does_not_exist_is_refused_on_import(fields, says):
    exp = Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": SEEDS})
    first = Value(
        name="first",
        kind="paper",
        statement="-",
        source="-",
        paper_value="-",
        experiment="e",
        measure=Measure("m", lambda run: 0.0),
        criterion=at_least(0),
    )
    second = Value(
        name="second",
        kind="paper",
        statement="-",
        source="-",
        paper_value="-",
        experiment="e",
        measure=Measure("m", lambda run: 0.0),
        criterion=at_least(0),
        **fields,
    )
    with pytest.raises(DeclarationError, match=says):
        Paper(name="p", title="-", experiments=(exp,), claims=(first, second))


def test_a_reach_size_for_a_key_the_task_lacks_is_refused_on_import():
    exp = Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": SEEDS}, reach={"task.gamma": 0.1})
    with pytest.raises(DeclarationError, match="task.gamma: unknown key for task=trigger"):
        Paper(name="p", title="-", experiments=(exp,), claims=())
    exp = Experiment(
        name="e",
        overrides={"task": "damping"},
        grid={"seed": SEEDS, "task.structure_seed": (0, 1)},
        cpu={"train.steps": 500},
        reach={"train.steps": 2000, "task.structure_seed": (0,)},
    )
    assert exp.argv("reach") == ["task=damping", "train.steps=2000", "seed=0,1,2", "task.structure_seed=0"]
    assert exp.argv("cpu") == ["task=damping", "train.steps=500", "seed=0,1,2", "task.structure_seed=0,1"]


def test_check_claims_of_a_paper_whose_runs_are_absent_says_not_run(tmp_path):
    exp = Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": SEEDS})
    paper = Paper(
        name="p",
        title="-",
        experiments=(exp,),
        claims=(
            Value(
                name="c",
                kind="paper",
                statement="-",
                source="-",
                paper_value="-",
                experiment="e",
                measure=Measure("m", lambda run: 0.0),
                criterion=at_least(0),
            ),
        ),
    )
    (result,) = check_claims(paper, tmp_path)
    assert (result.verdict, result.why) == ("not run", "no run selected")


def test_a_ratio_over_zero_is_not_run():
    from sinkexp.reproduce.declare import Paired

    over = Paired(
        name="over",
        kind="paper",
        statement="-",
        source="-",
        paper_value="-",
        experiment="e",
        where={"arm": "a"},
        measure=VALUE,
        criterion=at_least(1.0),
        against={"arm": "b"},
        compare="ratio",
    )
    verdict, why = verdicts([over], {"a": (2.0, 1.0), "b": (0.0, 1.0)})["over"]
    assert verdict == "not run" and why.endswith("over an against run's 0: no ratio")


def test_an_untrained_value_that_cannot_be_measured_is_no_failure_and_needs_a_contrast_to_hold():
    """NaN at step 0 (no sink to read yet) says nothing about whether the criterion could fail: the
    claim is not run, unless a contrast on the same runs holds trained and fails untrained."""
    sinks = claim("softmax_sinks", "softmax", at_least(0.9))
    unknown = claim("spread", "spread", at_least(0.5))
    beside = claim("spread_beside", "spread", at_least(0.5), contrast="softmax_sinks")
    found = verdicts([sinks, unknown, beside], {"softmax": (0.99, 0.1), "spread": (0.8, float("nan"))})
    assert found["softmax_sinks"] == ("holds", "")
    assert found["spread"] == (
        "not run",
        "its untrained value is NaN, and no contrast stands in for the check that it could fail",
    )
    assert found["spread_beside"] == (
        "holds",
        "its untrained value is NaN, but beside softmax_sinks, which holds only trained",
    )
