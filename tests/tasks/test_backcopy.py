"""task=backcopy: the sampler follows the bigram table and the copy rule, bad tables are refused, the
table's content is part of the config hash, and the samplers draw what torch.multinomial draws."""

import math

import pytest
import torch
from helpers import sample

from sinkexp.errors import ConfigError
from sinkexp.tasks.backcopy import BackcopyConfig, BackcopyTask, load_table  # noqa: E402


def write_table(path, cond, marginal, bos):
    import json

    path.write_text(json.dumps({"cond": cond, "marginal": marginal, "bos": bos}))
    return str(path)


def test_backcopy_follows_the_table_and_the_copy_rule(tmp_path):
    # Tokens 0, 1, 2 and BOS = 3. Token 0 is the most frequent, hence the single trigger.
    cond = [[0.0, 0.5, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0], [0.5, 0.25, 0.25, 0.0]]
    table = write_table(tmp_path / "t.json", cond, [0.5, 0.25, 0.25, 0.0], 3)
    task = BackcopyTask(BackcopyConfig(seq_len=12, n_triggers=1, bigram_table=table))
    assert task.triggers.tolist() == [0]
    batch = sample(task, 0, batch_size=256)
    x, y = batch.inputs, batch.targets
    assert torch.all(x[:, 0] == 3) and torch.all(x[:, 1] != 0)  # x_1 from the marginal without triggers
    assert torch.equal(y[:, :-1], x[:, 1:])  # next-token targets
    after_trigger = x[:, 1:] == 0
    assert torch.equal(y[:, 1:][after_trigger], x[:, :-1][after_trigger])  # back-copy
    rest = ~after_trigger
    assert torch.all(torch.tensor(cond)[x[:, 1:][rest], y[:, 1:][rest]] > 0)  # bigram draws
    # oracle: 0 after the trigger, H(row) otherwise: H(row 1) = 0, H(row 2) = log 2
    oracle = task.baseline_loss(batch)
    assert torch.all(oracle[:, 1:][after_trigger] == 0)
    torch.testing.assert_close(oracle[:, 1:][x[:, 1:] == 2], torch.full_like(oracle[:, 1:][x[:, 1:] == 2], math.log(2)))
    assert torch.all(oracle[:, 1:][x[:, 1:] == 1] == 0)
    torch.testing.assert_close(oracle[:, 0], torch.full((256,), math.log(2)))  # first token: 1 or 2, even odds


def test_backcopy_oracle_equals_the_loss_of_the_true_conditional():
    task = BackcopyTask(BackcopyConfig(seq_len=32))
    batch = sample(task, 0, batch_size=512)
    logits = task.cond[batch.inputs].clamp_min(1e-30).log()
    copy = task.is_trigger[batch.inputs]
    logits[copy] = torch.full_like(logits[copy], -1e9).scatter(-1, batch.targets[copy][:, None], 0.0)
    logits[:, 0] = task.first.clamp_min(1e-30).log()
    achieved = task.loss(logits, batch)[:, 1:].mean()
    oracle = task.baseline_loss(batch)[:, 1:].mean()
    assert abs(achieved.item() - oracle.item()) < 0.03  # sampled targets vs exact expectation


@pytest.mark.parametrize(
    "content,needle",
    [
        ({"cond": [[1.0, 0.0]], "marginal": [1.0], "bos": 0}, "square"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [1.0], "bos": 1}, "marginal"),
        ({"cond": [[0.7, 0.5], [1.0, 0.0]], "marginal": [1.0, 0.0], "bos": 1}, "sum to 1"),
        ({"cond": [[1.5, -0.5], [1.0, 0.0]], "marginal": [1.0, 0.0], "bos": 1}, "non-negative"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [1.0, 0.0], "bos": 2}, "bos"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "bos": 1}, "missing"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [float("nan"), 1.0], "bos": 1}, "not finite"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [float("inf"), 0.0], "bos": 1}, "not finite"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [0.0, 0.0], "bos": 1}, "marginal must sum to 1"),
        ({"cond": [[0.5, 0.5], [1.0, 0.0]], "marginal": [1.0, 0.0], "bos": True}, "integer token id"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_bigram_tables_are_refused(tmp_path, content, needle):
    import json

    path = tmp_path / "table.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=needle) as err:
        load_table(str(path))
    assert "task.bigram_table" in str(err.value)
    with pytest.raises(ConfigError, match="cannot be read"):
        load_table(str(tmp_path / "missing.json"))


def test_a_marginal_with_no_mass_outside_bos_and_the_triggers_is_refused(tmp_path):
    import json

    path = tmp_path / "table.json"  # tokens 0, 1, 2 and BOS 3; only tokens 0 and 1 have marginal mass
    path.write_text(
        json.dumps(
            {
                "cond": [[0.0, 1.0, 0.0, 0.0], [1.0, 0, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]],
                "marginal": [0.6, 0.4, 0.0, 0.0],
                "bos": 3,
            }
        )
    )
    BackcopyTask.validate(BackcopyConfig(bigram_table=str(path), n_triggers=1, seq_len=8))  # token 1 is left
    with pytest.raises(ConfigError, match="no mass outside BOS"):
        BackcopyTask.validate(BackcopyConfig(bigram_table=str(path), n_triggers=2, seq_len=8))


def test_the_table_content_is_part_of_the_config_hash(tmp_path, make_config):
    import json

    from sinkexp.config.identity import config_hash

    path = tmp_path / "table.json"
    table = {"cond": [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], "marginal": [0.5, 0.5, 0.0], "bos": 2}
    path.write_text(json.dumps(table))
    cfg = make_config("task=backcopy", f"task.bigram_table={path}", "task.n_triggers=1")
    before = config_hash(cfg)
    table["cond"][0] = [0.25, 0.75, 0.0]  # edited in place, same path
    path.write_text(json.dumps(table))
    assert config_hash(cfg) != before


def test_backcopy_multinomial_sampler_draws_the_first_releases_stream(make_config):
    """task.sampler=multinomial keeps the first release's draws, and with its position scale its run
    names (hash pinned from the first release)."""
    from sinkexp.config.identity import config_hash

    task = BackcopyTask(BackcopyConfig(seq_len=16, sampler="multinomial"))
    batch = task.sample(4, torch.Generator().manual_seed(0), "cpu")
    assert batch.inputs[:2].tolist() == [
        [64, 58, 23, 44, 21, 36, 2, 36, 43, 14, 26, 45, 1, 25, 0, 25],
        [64, 9, 29, 4, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0],
    ]
    first_release = ("task=backcopy", "task.sampler=multinomial", "model.pos_init_std=0.02")
    assert config_hash(make_config(*first_release)) == "9fe29307"
    assert config_hash(make_config("task=backcopy")) != "9fe29307"  # the new default is another stream


@pytest.mark.parametrize("rows", ["gathered", "expanded"])
def test_one_sample_draws_what_torch_multinomial_draws(rows):
    """backcopy.one_sample (no host wait on a GPU) against torch.multinomial(p, 1): the same tokens,
    zero-probability entries never drawn, and the generator left in the same state."""
    from sinkexp.tasks.backcopy import one_sample

    table = torch.rand(65, 65, generator=torch.Generator().manual_seed(1))
    table[:, 3] = 0.0
    table /= table.sum(-1, keepdim=True)
    probs = table[torch.randint(65, (512,))] if rows == "gathered" else table[0].expand(512, -1)
    ours, theirs = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    drawn = one_sample(probs, ours)
    assert torch.equal(drawn, torch.multinomial(probs, 1, generator=theirs).squeeze(1))
    assert torch.equal(ours.get_state(), theirs.get_state()) and not (drawn == 3).any()
    assert len(set(drawn.tolist())) > 30


@pytest.mark.parametrize("table", ["synthetic", "sparse"])
def test_backcopy_inverse_cdf_sampler_follows_the_table(tmp_path, table):
    """Goodness of fit over ~500k transitions: every empirical transition frequency within 5 standard
    errors (plus 1e-3) of the table, x_1 from the marginal without BOS and triggers, no
    zero-probability transition ever drawn, and the copy rule after every trigger."""
    import json

    if table == "sparse":  # rows with zeros at the start, the middle and the end
        path = tmp_path / "t.json"
        cond = [
            [0.0, 0.5, 0.0, 0.5, 0.0],
            [0.2, 0.0, 0.8, 0.0, 0.0],
            [0.0, 0.0, 0.0, 1.0, 0.0],
            [0.3, 0.3, 0.4, 0.0, 0.0],
            [0.25, 0.25, 0.25, 0.25, 0.0],
        ]
        path.write_text(json.dumps({"cond": cond, "marginal": [0.25, 0.25, 0.25, 0.25, 0.0], "bos": 4}))
        cfg = BackcopyConfig(seq_len=128, bigram_table=str(path), n_triggers=1)
    else:
        cfg = BackcopyConfig(seq_len=128)
    task = BackcopyTask(cfg)
    batch = task.sample(4096, torch.Generator().manual_seed(0), "cpu")
    again = task.sample(4096, torch.Generator().manual_seed(0), "cpu")
    assert torch.equal(batch.inputs, again.inputs)  # same generator state, same draws
    x, y = batch.inputs, batch.targets
    copied = task.is_trigger[x[:, 1:]]
    assert torch.equal(y[:, 1:][copied], x[:, :-1][copied])  # back-copy after every trigger
    current, following = x[:, 1:][~copied], y[:, 1:][~copied]  # bigram draws
    n = task.vocab_size
    counts = torch.zeros(n, n, dtype=torch.float64).index_put_(
        (current, following), torch.ones(len(current), dtype=torch.float64), accumulate=True
    )
    cond = task.cond.double()
    assert counts[cond == 0].sum() == 0  # impossible transitions never drawn
    seen = counts.sum(-1) >= 2000
    frequency = counts[seen] / counts[seen].sum(-1, keepdim=True)
    p = cond[seen]
    bound = 5 * (p * (1 - p) / counts[seen].sum(-1, keepdim=True)).sqrt() + 1e-3
    assert ((frequency - p).abs() <= bound).all(), (frequency - p).abs().max()
    first = torch.bincount(x[:, 1], minlength=n).double() / len(x)
    assert ((first - task.first.double()).abs() <= 5 * (task.first.double() / len(x)).sqrt() + 1e-3).all()
    assert first[task.is_trigger].sum() == 0 and first[task.bos] == 0
