"""CUDA checks: skipped where torch sees no GPU (CI never has one)."""
import pytest
import torch

from sinkexp.runner import resolve_device, run
from sinkexp.tasks import TASKS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_auto_resolves_to_an_indexed_cuda_device():
    assert resolve_device("auto") == torch.device("cuda", torch.cuda.current_device())


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_trains_and_evaluates_on_cuda(make_config, tmp_path, task):
    cfg = make_config(f"task={task}", "train.steps=20", "eval.every=10", "train.batch_size=16",
                      "eval.batch_size=32", "device=cuda")
    summary = run(cfg, tmp_path)
    assert (tmp_path / "DONE").exists() and summary["step"] == 20


def test_fused_and_explicit_attention_agree_on_cuda():
    from sinkexp.config import AttnConfig
    from sinkexp.model import capture
    from sinkexp.model.attention import Attention

    torch.manual_seed(0)
    attention = Attention(64, 4, AttnConfig()).cuda()
    x = torch.randn(8, 32, 64, device="cuda")
    visible = torch.ones(32, 32, dtype=torch.bool, device="cuda").tril()
    fused = attention(x, visible)
    with capture(attention, ["weights"]):
        explicit = attention(x, visible)
    torch.testing.assert_close(fused, explicit, atol=1e-4, rtol=1e-4)
