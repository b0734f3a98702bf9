"""task=damping_dynamics against the source's own code: Kempner attention_sink (a83cd59),
toy/notebooks/noop_dynamics.ipynb, as scripts/dynamics_notebook.py transcribes it (cell 2's OneHead,
cell 3's training step). Given the same draws (initial weights, gate vector,
batches), sinkexp's trainer and the notebook's loop must train the same model: the same loss at
every step and the same weights after. Where the two codes' sinks land can then differ only by
their draws (docs/findings/fesser2026.md, "where the dynamics sink lands")."""

import math

import torch
from conftest import load_script

from sinkexp.jobs.runner import make_trainer

notebook = load_script("dynamics_notebook")  # OneHead, notebook_step, copy_into_notebook


def test_the_dynamics_form_trains_as_the_notebooks_loop(make_config):
    """40 steps, batch 64, the preset's optimiser (AdamW lr 3e-3, wd 1e-4, no clipping; the notebook's
    cell 3): the losses agree step for step and every weight after, with the notebook's model fed
    sinkexp's draws (its initial weights, task.gate, and each batch the trainer is about to draw)."""
    cfg = make_config("task=damping_dynamics", "train.batch_size=64", "device=cpu")
    tasks, trainer = make_trainer([cfg], torch.device("cpu"))
    theirs = notebook.copy_into_notebook(trainer.model)
    opt = torch.optim.AdamW(theirs.parameters(), lr=3e-3, weight_decay=1e-4)  # cell 3's optimiser
    for _ in range(40):
        upcoming = torch.Generator().set_state(trainer.generator.get_state())
        x = tasks[0].sample(64, upcoming, "cpu").inputs
        ours = trainer.train_step()
        torch.testing.assert_close(ours, notebook.notebook_step(theirs, opt, x, tasks[0].gate))
    expected = notebook.copy_into_notebook(trainer.model).state_dict()
    for name, weight in theirs.state_dict().items():
        torch.testing.assert_close(weight, expected[name], rtol=1e-4, atol=1e-5, msg=name)
    assert trainer.model.embed_norm.weight.sub(1).abs().max() > 1e-3  # the weights moved: the check bites


# The notebook's initial laws (cell 2): nn.Linear's U(-1/8, 1/8) for fan-in 64 (std 1/(8 sqrt 3));
# positions and BOS vector N(0, 0.02^2); LayerNorm 1 and 0. name -> (std, bound or None, tolerance on the std)
LAWS = {
    **{f"W{m}.weight": (1 / (8 * math.sqrt(3)), 1 / 8, 0.05) for m in "qkvo"},
    "pos": (0.02, None, 0.06),
    "bos": (0.02, None, 0.3),
    "norm.weight": (0.0, 1.0, 0),
    "norm.bias": (0.0, 0.0, 0),
}


def test_the_initial_weights_follow_the_notebooks_laws(make_config):
    """The draws' laws match too: each weight of sinkexp's model (Q, K, V from its one fused
    Linear(64, 192)), moved into a OneHead, and each of the transcribed OneHead's own, has its law's
    spread and bound (the tolerance: about three standard errors of a std over that many draws)."""
    cfg = make_config("task=damping_dynamics", "device=cpu")
    ours = notebook.copy_into_notebook(make_trainer([cfg], torch.device("cpu"))[1].model).state_dict()
    torch.manual_seed(1)
    theirs = notebook.OneHead().state_dict()
    assert set(theirs) == set(LAWS)
    for name, (std, bound, tolerance) in LAWS.items():
        for weights in (ours[name], theirs[name]):
            assert abs(weights.std().item() - std) <= tolerance * std, name
            if bound is not None:
                assert weights.abs().max().item() <= bound and weights.abs().max().item() >= 0.97 * bound, name
