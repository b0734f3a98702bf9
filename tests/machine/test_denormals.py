"""sinkexp/machine/denormals.py: subnormal floats are flushed to zero in a job's CPU arithmetic, on
every torch thread, unless SINKEXP_DENORMALS=keep."""

import json
import os
import subprocess
import sys

import pytest

# In a fresh process (the mode stays set in the process that sets it): the smallest normal float32
# times 2^-10 is the subnormal 2^-136; flushed, it is 0. Over 2^22 elements with two threads, torch
# splits the product between its OpenMP threads, which must inherit the mode.
PROBE = """
import json, torch
torch.set_num_threads(2)
from sinkexp.machine.denormals import flush_denormals
how = flush_denormals()
tiny = torch.tensor(torch.finfo(torch.float32).tiny)
one = (tiny * 2.0**-10).item()
many = torch.full((2**22,), float(tiny)) * torch.full((2**22,), 2.0**-10)
print(json.dumps({"how": how, "one": one, "nonzero": int(many.count_nonzero())}))
"""


def probe(**env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "AMD64"), reason="x86's FTZ/DAZ modes")
def test_subnormals_are_flushed_on_every_thread():
    flushed = probe(SINKEXP_DENORMALS="")
    assert flushed["how"].startswith("flushed to zero")
    assert flushed["one"] == 0.0 and flushed["nonzero"] == 0


def test_keep_leaves_subnormals():
    kept = probe(SINKEXP_DENORMALS="keep")
    assert kept["how"] == "kept (SINKEXP_DENORMALS=keep)"
    assert kept["one"] == 2.0**-136 and kept["nonzero"] == 2**22
