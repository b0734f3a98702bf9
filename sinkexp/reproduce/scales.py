"""A claim judged at several sizes: claims.csv's `scale` column, one row per claim and scale it was
run at (cpu: the CPU sizes; reach: the sizes at which the experiment's effect forms on 2 cores;
pretrained: the pre-trained checkpoints, measured, not trained; paper: the source's). The verdict
that counts is the one at the largest scale run; the CPU verdicts stay beside it (docs/reproduce.md,
"Scales").
"""

from __future__ import annotations

import pandas as pd

from sinkexp.config.schema import SCALES as SIZES  # the scale config group's, smallest to largest
from sinkexp.reproduce.declare import Paper

PRETRAINED = "pretrained"  # the claims on checkpoints (experiment.Checkpoint), the shipped ones' only scale: no size
CLAIM_SCALES = (*SIZES[:-1], PRETRAINED, SIZES[-1])  # claims.csv's scales, smallest to largest: below the papers' sizes


def with_scale(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with a scale column: cpu where a table written before the column has none."""
    scale = rows["scale"].fillna("cpu") if "scale" in rows else "cpu"
    return rows.assign(scale=scale)


def reach_sized(paper) -> set[str]:
    """The experiments of `paper` that declare a reach size."""
    return {exp.name for exp in paper.experiments if getattr(exp, "reach", None)}


def checkpoint_claim(paper, claim) -> bool:
    """Whether every experiment `claim` reads is a checkpoint (measured, not trained)."""
    return all(hasattr(paper.experiment(name), "model") for name in claim.experiments)


def shipped_claim(paper, claim) -> bool:
    """Whether `claim` reads a checkpoint sinkexp ships (hf/shipped.py): judged at scale=pretrained only."""
    return any(getattr(paper.experiment(name), "shipped", False) for name in claim.experiments)


def judged_at(paper, scale: str) -> set[str]:
    """The claims of `paper` a run at `scale` judges: at reach, those whose experiments all declare a
    reach size (the others would repeat the CPU verdict at the CPU sizes); at pretrained, those on
    checkpoints alone; at cpu and paper, all but those on the shipped checkpoints, whose one scale is
    pretrained."""
    if scale == PRETRAINED:
        return {claim.name for claim in paper.claims if checkpoint_claim(paper, claim)}
    claims = [claim for claim in paper.claims if not shipped_claim(paper, claim)]
    if scale != "reach":
        return {claim.name for claim in claims}
    sized = reach_sized(paper)
    return {claim.name for claim in claims if set(claim.experiments) <= sized}


def measured_at(paper, scale: str) -> list:
    """The checkpoints of `paper` the claims judged at `scale` read, in declaration order."""
    judged = [paper.claim(name) for name in judged_at(paper, scale)]
    read = {name for claim in judged for name in claim.experiments}
    return [exp for exp in paper.experiments if hasattr(exp, "model") and exp.name in read]


def trained_at(paper, scale: str) -> set[str]:
    """The experiments of `paper` a run at `scale` trains: at reach, those with a reach size, and
    those without only where a judged claim reads them, or a claim it names (premises, contrasts,
    `reached`), through their names in turn: the others' runs would feed only verdicts the CPU sizes
    give already. At pretrained none (checkpoints are measured); at cpu and paper, all."""
    if scale == PRETRAINED:
        return set()
    if scale != "reach":
        return {exp.name for exp in paper.experiments}
    named = judged_at(paper, scale)
    for claim in reversed(paper.claims):  # a claim names only earlier ones: one pass back finds every name
        if claim.name in named:
            named |= {*claim.requires, *claim.reached, *claim.contrast}
    return reach_sized(paper) | {exp for claim in paper.claims if claim.name in named for exp in claim.experiments}


def at_largest(rows: pd.DataFrame) -> pd.DataFrame:
    """Each claim's row at the largest scale it was run at, in the rows' order."""
    rows = with_scale(rows)
    rank = rows["scale"].map(CLAIM_SCALES.index)
    return rows[rank == rank.groupby([rows["paper"], rows["claim"]]).transform("max")]


def declarations(rows: pd.DataFrame) -> str:
    """Each paper's declaration digest (declare.Paper.digest), or, where its rows were judged against
    several (one scale regenerated after the declaration changed), each digest with the scales whose
    rows answer it: "p 1a2b3c4d" or "p 1a2b3c4d (cpu), 5e6f7a8b (reach, pretrained)"."""
    rows = with_scale(rows)
    listed = []
    for paper, at in rows.groupby("paper", sort=False):
        scales = at.groupby(at["declaration"].fillna(""), sort=False)["scale"].unique()
        if len(scales) == 1:
            listed.append(f"{paper} {scales.index[0]}")
        else:
            listed.append(f"{paper} " + ", ".join(f"{digest} ({', '.join(named)})" for digest, named in scales.items()))
    return "; ".join(listed)


def side_by_side(claims: pd.DataFrame) -> list[str]:
    """One paper's claims with their verdict at each scale run (a markdown table; -: not run there)."""
    claims = with_scale(claims)
    scales = [scale for scale in CLAIM_SCALES if (claims["scale"] == scale).any()]
    verdict = {(row["claim"], row["scale"]): row["verdict"] for _, row in claims.iterrows()}
    lines = ["| claim | kind | " + " | ".join(f"at {scale}" for scale in scales) + " |"]
    lines.append("|---|---|" + "---|" * len(scales))
    for _, row in claims.drop_duplicates("claim").iterrows():
        cells = [verdict.get((row["claim"], scale), "-") for scale in scales]
        lines.append(f"| {row['claim']} | {row['kind']} | " + " | ".join(cells) + " |")
    return lines


def unrecorded(rows: pd.DataFrame, papers: list[Paper]) -> str:
    """'' when `rows` (a claims.csv) hold a CPU-scale row for every claim of `papers` judged at cpu
    (all but those on the shipped checkpoints, judged at scale=pretrained only: judged_at) and
    none for a claim they no longer declare; else one sentence naming the claims and the command that
    writes them."""
    cpu = with_scale(rows)
    recorded = set(zip(*(cpu.loc[cpu["scale"] == "cpu", column] for column in ("paper", "claim"))))
    declared = {(paper.name, name) for paper in papers for name in judged_at(paper, "cpu")}
    for pairs, state, does in (
        (declared - recorded, "no row for", "runs their experiments and writes their rows"),
        (recorded - declared, "rows for the undeclared", "rewrites their papers' rows"),
    ):
        if pairs:
            names = ", ".join(f"{paper}/{claim}" for paper, claim in sorted(pairs))
            command = f"sinkexp reproduce {' '.join(sorted({paper for paper, _ in pairs}))} --docs docs"
            return f"docs/claims.csv has {state} {names}: `{command}` {does}."
    return ""
