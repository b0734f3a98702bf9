"""sinkexp's optimiser (train/optimizer.py) is torch.optim.AdamW and SGD: the same parameters and
state bit for bit over steps with a changing learning rate, state_dicts that load either way, and a
run on the CPU that never imports torch's compiler."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from sinkexp.train.optimizer import make_optimizer

SETTINGS = {
    "adamw": ("train.optim=adamw", "train.lr=3e-3", "train.weight_decay=0.1", "train.betas=[0.8,0.95]"),
    "sgd": ("train.optim=sgd", "train.lr=3e-2", "train.weight_decay=0.01", "train.momentum=0.9"),
    "sgd without momentum": ("train.optim=sgd", "train.lr=3e-2", "train.momentum=0"),
}


def torch_optimizer(params, cfg) -> torch.optim.Optimizer:
    if cfg.optim == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)


def parameters(seed: int = 0) -> list[torch.Tensor]:
    """A matrix, a vector and a 0-d tensor, one of them left without a gradient at some steps."""
    generator = torch.Generator().manual_seed(seed)
    shapes = [(4, 5), (5,), ()]
    return [torch.randn(shape, generator=generator).requires_grad_() for shape in shapes]


def step_both(ours, theirs, params_ours, params_theirs, steps: range, generator) -> None:
    for step in steps:
        for group in (*ours.param_groups, *theirs.param_groups):
            group["lr"] = 3e-3 * (0.5 if step % 3 == 2 else 1.0)
        for i, (p, q) in enumerate(zip(params_ours, params_theirs)):
            g = torch.randn(p.shape, generator=generator)
            p.grad = None if (i == 2 and step % 2) else g
            q.grad = None if (i == 2 and step % 2) else g.clone()
        ours.step()
        theirs.step()
        ours.zero_grad(set_to_none=True)
        theirs.zero_grad(set_to_none=True)


def assert_same(ours, theirs, params_ours, params_theirs) -> None:
    for p, q in zip(params_ours, params_theirs):
        assert torch.equal(p, q)
    mine, reference = ours.state_dict(), theirs.state_dict()
    assert mine["param_groups"] == reference["param_groups"]
    assert mine["state"].keys() == reference["state"].keys()
    for index, entry in reference["state"].items():
        assert mine["state"][index].keys() == entry.keys()
        for key, value in entry.items():
            assert mine["state"][index][key].dtype == value.dtype
            assert mine["state"][index][key].device == value.device
            assert torch.equal(mine["state"][index][key], value), (index, key)


@pytest.mark.parametrize("setting", SETTINGS)
def test_steps_and_state_dict_are_torchs(make_config, setting):
    cfg = make_config(*SETTINGS[setting]).train
    params_ours, params_theirs = parameters(), parameters()
    ours, theirs = make_optimizer(params_ours, cfg), torch_optimizer(params_theirs, cfg)
    generator = torch.Generator().manual_seed(1)
    step_both(ours, theirs, params_ours, params_theirs, range(5), generator)
    assert_same(ours, theirs, params_ours, params_theirs)

    # Each side's state_dict loads into a fresh optimiser of the other, and both go on alike.
    resumed_ours, resumed_theirs = [p.detach().clone() for p in params_ours], [p.detach().clone() for p in params_ours]
    for p in (*resumed_ours, *resumed_theirs):
        p.requires_grad_()
    into_ours, into_theirs = make_optimizer(resumed_ours, cfg), torch_optimizer(resumed_theirs, cfg)
    into_ours.load_state_dict(theirs.state_dict())
    into_theirs.load_state_dict(ours.state_dict())
    assert_same(into_ours, theirs, resumed_ours, params_theirs)
    step_both(into_ours, into_theirs, resumed_ours, resumed_theirs, range(5, 9), generator)
    step_both(ours, theirs, params_ours, params_theirs, range(5, 9), torch.Generator().manual_seed(2))
    assert_same(into_ours, into_theirs, resumed_ours, resumed_theirs)


def test_refuses_a_state_of_another_model(make_config):
    cfg = make_config().train
    saved = make_optimizer(parameters(), cfg).state_dict()
    with pytest.raises(ValueError, match="holds 3 parameters where the model has 2"):
        make_optimizer(parameters()[:2], cfg).load_state_dict(saved)


def test_a_cpu_run_imports_no_compiler_and_no_pandas(tmp_path):
    """The 2 s of torch._dynamo (with sympy) that torch.optim and use_deterministic_algorithms would
    import are not paid by a run that compiles nothing, nor pandas' 0.2 s by a run that writes its
    tables as plain rows (docs/performance.md, Start-up)."""
    run = [
        "from sinkexp.cli import invoke; import sys",
        "code = invoke(['train', 'task=trigger', 'train.steps=2', 'train.warmup=0', 'eval.every=1', 'threads=1',"
        " 'train.grad_clip=1.0'])",
        "assert code == 0, code",
        "unpaid = ('torch._dynamo', 'torch._inductor', 'sympy', 'pandas')",
        "print(sorted(m for m in sys.modules if m.startswith(unpaid)))",
    ]
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(run)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
