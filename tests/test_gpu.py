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


def test_replicas_on_cuda_equal_lone_runs(make_config, tmp_path):
    import pandas as pd

    from sinkexp.config import run_configs
    from sinkexp.runner import train_together

    quick = ("train.steps=20", "eval.every=10", "train.checkpoint_every=10", "train.batch_size=16",
             "eval.batch_size=32", "model.n_heads=2", "device=cuda")
    cfg = make_config(*quick, "train.replicas=3")
    train_together(run_configs(cfg), [tmp_path / f"together{k}" for k in range(3)])
    for k, lone in enumerate(run_configs(cfg)):
        run(lone, tmp_path / f"alone{k}")     # replicas=3 is not hashed: the lone run is the same run
        together = pd.read_csv(tmp_path / f"together{k}/metrics.csv")["value"]
        alone = pd.read_csv(tmp_path / f"alone{k}/metrics.csv")["value"]
        torch.testing.assert_close(torch.tensor(together.to_numpy()), torch.tensor(alone.to_numpy()),
                                   rtol=2e-3, atol=1e-4)


def test_compiled_replicas_with_cuda_graphs_match_eager(make_config):
    from sinkexp.config import run_configs
    from sinkexp.runner import make_trainer

    trainers = [make_trainer(run_configs(make_config("model.n_heads=2", "train.replicas=4", "device=cuda",
                                                         f"train.compile={compile}")), torch.device("cuda"))[1]
                for compile in (False, True)]
    for _ in range(5):
        eager, compiled = (trainer.train_step() for trainer in trainers)
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("replicas", [1, 4])
def test_training_steps_never_wait_for_the_gpu(make_config, task, replicas):
    """No host synchronisation inside a step: data, loss, clipping and optimiser stay on the device."""
    from sinkexp.config import run_configs
    from sinkexp.runner import make_trainer

    cfg = make_config(f"task={task}", "train.batch_size=16", f"train.replicas={replicas}", "device=cuda")
    _, trainer = make_trainer(run_configs(cfg), torch.device("cuda"))
    trainer.train_step()                    # the first step allocates optimiser state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            trainer.train_step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
