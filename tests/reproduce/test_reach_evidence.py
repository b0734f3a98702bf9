"""What shows a size suffices (reproduce/verdicts.py, docs/reproduce.md "The verdict"), on hand-built
curves: `reached` evidence counts only from a claim of the same route (declare.py refuses another)
that held on every run and formed by half of training on each; and a claim whose source gives no
magnitude reads its direction beyond the spread (`ratio beyond spread`, against UNTRAINED)."""

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from hand_built import SEEDS, claim, curve_run, runs, verdicts, with_initial

from sinkexp.reproduce.declare import (
    UNTRAINED,
    DeclarationError,
    Experiment,
    Paired,
    Paper,
    Trend,
    at_least,
    at_most,
    between,
)
from sinkexp.reproduce.finished import FinishedRun
from sinkexp.reproduce.judge import judge
from sinkexp.reproduce.verdicts import FORMED_BY

ROUTE = "bos_softmax"
EVIDENCE = claim("bos_sinks", "bos", at_least(0.5), forms=True, route=ROUTE)
VARIANT = claim("variant_sinks", "variant", at_least(0.5), forms=True, reached="bos_sinks", route=ROUTE)
FLAT = {"variant": (0.2, 0.1)}  # the variant forms nothing, at any step
MISSED = "misses it on s0 (0.2), s1 (0.2), s2 (0.2)"


def evidence(*formed: int, last: int = 4000, lost: int | None = None) -> list:
    """The evidence arm's runs, one per seed, each above 0.5 from step `formed[seed]` to `last`
    (evaluated every 1000 steps); with `lost`, seed 0 also dips below at that step."""
    curves = []
    for seed, start in zip(SEEDS, formed):
        curve = {step: 0.6 if step >= start else 0.2 for step in range(1000, last + 1, 1000)}
        if lost is not None and seed == 0:
            curve[lost] = 0.2
        curves.append(curve_run(seed, {0: 0.1, **curve}, arm="bos"))
    return curves


def test_the_evidence_counts_where_it_formed_by_half_of_training_on_every_run():
    assert FORMED_BY == 0.5
    got = verdicts([EVIDENCE, VARIANT], FLAT, extra=evidence(1000, 2000, 2000))
    assert got["bos_sinks"] == ("holds", "")
    assert got["variant_sinks"] == (
        "contradicted",
        f"did not form although bos_sinks formed by the same route ({ROUTE}) by 0.5 of training on every run "
        f"(from steps 1000-2000 of 4000); {MISSED}",
    )


@pytest.mark.parametrize(
    "curves,says",
    [
        (evidence(1000, 2000, 3000), "bos_sinks formed later than 0.5 of training on s2 (s2: from step 3000 of 4000)"),
        # met at 1000, lost at 2000, formed again from 3000: it formed when it stayed
        (evidence(1000, 1000, 1000, lost=2000), "later than 0.5 of training on s0 (s0: from step 3000 of 4000)"),
    ],
)
def test_evidence_that_formed_late_or_did_not_stay_leaves_the_variant_not_reached(curves, says):
    verdict, why = verdicts([EVIDENCE, VARIANT], FLAT, extra=curves)["variant_sinks"]
    assert verdict == "not reached" and says in why and why.endswith(f"nothing here tells later from never; {MISSED}")


def test_evidence_that_did_not_hold_or_whose_formation_cannot_be_read_shows_nothing():
    partly = evidence(1000, 1000, 9000)  # seed 2 never formed
    verdict, why = verdicts([EVIDENCE, VARIANT], FLAT, extra=partly)["variant_sinks"]
    assert (verdict, why) == (
        "not reached",
        f"its evidence bos_sinks contradicted; nothing here tells too small from absent; {MISSED}",
    )
    flat = {"bos": (0.9, 0.1), **FLAT}  # a run with no tables: when it formed cannot be read
    verdict, why = verdicts([EVIDENCE, VARIANT], flat)["variant_sinks"]
    assert (verdict, why) == (
        "not reached",
        "when bos_sinks formed cannot be read (s0 has no evaluated step after "
        f"0); nothing here tells later from never; {MISSED}",
    )


def trend_runs(early: bool) -> list[FinishedRun]:
    """Three seeds of an arm whose value falls with `length` (rho -1), beside evidence formed early or late."""
    settings = [{"seed": seed, "arm": "ctx", "length": n, "value": 4.0 - n} for seed in SEEDS for n in (1, 2, 3)]
    ranked = [
        with_initial(FinishedRun(Path(f"ctx-{i}"), chosen, pd.DataFrame(), experiment="e"), 0.0)
        for i, chosen in enumerate(settings)
    ]
    return ranked + evidence(1000, 1000, 1000 if early else 3000)


def test_a_trend_naming_evidence_is_contradicted_only_where_the_evidence_formed_early():
    more = claim("longer_more", "ctx", at_least(0.8), kind=Trend, key="length", reached="bos_sinks", route=ROUTE)
    plain = claim("longer_more_plain", "ctx", at_least(0.8), kind=Trend, key="length")
    early = verdicts([EVIDENCE, more, plain], {}, extra=trend_runs(early=True))
    assert early["longer_more"][0] == "contradicted" and early["longer_more"][1].startswith("missed although bos_sinks")
    late = verdicts([EVIDENCE, more, plain], {}, extra=trend_runs(early=False))
    assert late["longer_more"][0] == "not reached" and late["longer_more_plain"][0] == "contradicted"


EXP = Experiment(name="e", overrides={"task": "trigger"}, grid={"seed": SEEDS})


@pytest.mark.parametrize(
    "variant,says",
    [
        (dict(route="first_position"), "reached='bos_sinks' forms by route 'bos_softmax', not this claim's"),
        (dict(route=""), "reached='bos_sinks' needs route="),
        (dict(route="by_magic"), "route='by_magic'; choose one of: bos_softmax, "),
    ],
)
def test_evidence_of_another_route_or_none_is_refused_on_import(variant, says):
    declared = (replace(EVIDENCE, where={}), replace(VARIANT, where={}))  # declarations select by real keys
    Paper(name="p", title="-", experiments=(EXP,), claims=declared)  # the same route: accepted
    with pytest.raises(DeclarationError, match=f"p/variant_sinks: {says}"):
        Paper(name="p", title="-", experiments=(EXP,), claims=(declared[0], replace(declared[1], **variant)))


def beyond(criterion, **fields) -> Paired:
    return claim("beyond", "arm", criterion, kind=Paired, against=UNTRAINED, compare="ratio beyond spread", **fields)


def test_a_direction_beyond_the_untrained_spread():
    """Each run over its own untrained value, discounted by the untrained values' max / min (here
    1.02): a rise passes 1 only beyond it, and untrained (1 / 1.02 per run) it cannot pass."""
    rises = runs("arm", (1.10, 1.06, 1.02), (1.00, 1.01, 1.02))
    got = verdicts([beyond(at_least(1.0, by="direction"))], {}, extra=rises)["beyond"]
    assert got == ("contradicted", "misses it on s2 (0.9804)")
    table = pd.DataFrame({"run": [str(r.path) for r in rises], "status": "done", "arm": "arm"})
    result = judge(beyond(at_least(1.0, by="direction")), rises, table)
    assert result.values["s0"] == pytest.approx(1.10 / 1.00 / 1.02)
    assert result.initial == pytest.approx(dict.fromkeys(("s0", "s1", "s2"), 1 / 1.02))
    falls = runs("arm", (0.2, 0.22, 0.3), (0.98, 0.99, 1.0))  # a fall: x (max / min), <= 1
    assert verdicts([beyond(at_most(1.0, by="direction"))], {}, extra=falls)["beyond"] == ("holds", "")
    within = runs("arm", (0.985, 0.99, 0.99), (0.98, 0.99, 1.0))  # no further below than the spread
    assert verdicts([beyond(at_most(1.0, by="direction"))], {}, extra=within)["beyond"][0] == "contradicted"


@pytest.mark.parametrize(
    "fields,says",
    [
        (dict(criterion=between(0.5, 1.0)), "compare='ratio beyond spread' reads a direction"),
        (dict(criterion=at_least(1.0), against_in="e"), "against=UNTRAINED pairs each run with itself at step 0"),
    ],
)
def test_a_direction_beyond_spread_needs_a_one_sided_bound_and_its_own_untrained_run(fields, says):
    criterion = fields.pop("criterion")
    with pytest.raises(DeclarationError, match=says):
        Paper(name="p", title="-", experiments=(EXP,), claims=(replace(beyond(criterion, **fields), where={}),))
