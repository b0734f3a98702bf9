"""A measurement's config hash (hf/identity.py): the keys added after runs were measured leave those
runs' hashes as they were, and change the hash where set."""

import dataclasses
import hashlib
import json

from sinkexp.config.settings import MeasureConfig
from sinkexp.hf.identity import UNHASHED, measure_hash


def test_earlier_runs_keep_their_hashes_and_a_later_key_set_changes_it():
    cfg = MeasureConfig(model="m")  # the hash as written before the keys existed: every setting but UNHASHED
    later = ("perturb", "skip", "init")  # keys added after runs were measured: at their defaults, not hashed
    before = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in (*UNHASHED, *later)}
    before.update(model="d", text="t", revision=None, chunk=None)
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:8]
    later_set = (("perturb", True), ("skip", 64), ("init", 0))
    changed = [dataclasses.replace(cfg, **{key: value}) for key, value in later_set]
    assert measure_hash(cfg, "d", "t") == digest
    assert len({digest, *(measure_hash(c, "d", "t") for c in changed)}) == 4
