"""Overrides as people type them (config/compose.py, validate.py): a whole number written as a float
is the integer it is, and an unknown key added with `+` names the valid keys and the closest one."""

import pytest
from helpers import sinkexp

from sinkexp.commands.overrides import read_sweep
from sinkexp.config.compose import whole_numbers
from sinkexp.config.typed import train_integer_keys
from sinkexp.errors import ConfigError
from sinkexp.jobs.plan import plan


def test_a_whole_number_written_as_a_float_is_the_integer(make_config):
    assert whole_numbers(["train.steps=1e3", "+seed=2.0", "train.lr=1e3", "name=1e3"]) == [
        "train.steps=1000",
        "+seed=2",
        "train.lr=1e3",  # a float key keeps what was typed
        "name=1e3",
    ]
    cfg = make_config("train.steps=1e3", "task.seq_len=2e1")
    assert (cfg.train.steps, cfg.task.seq_len) == (1000, 20) and type(cfg.train.steps) is int
    jobs = plan(
        read_sweep(["train.steps=1e3,2e3"], multirun=True)
    ).jobs  # each job of a sweep too, as its launcher reads it
    assert [job.overrides for job in jobs] == [("train.steps=1000",), ("train.steps=2000",)]
    assert {"train.steps", "seed", "task.seq_len", "task.structure_seed", "threads"} <= train_integer_keys()
    assert not {"train.lr", "model.qk_norm", "name"} & train_integer_keys()


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["train.steps=2.5"], "train.steps=2.5 is not valid; it must be a whole number (e.g. 1000 or 1e3)"),
        (["train.steps=1e3,2.5"], "train.steps=2.5 is not valid; it must be a whole number (e.g. 1000 or 1e3)"),
        (["train.steps=nan"], "train.steps=nan is not valid; it must be a whole number (e.g. 1000 or 1e3)"),
        (["train.steps=abc"], "train.steps='abc' is not valid; it must be a whole number (e.g. 1000 or 1e3)"),
        (["train.lr=abc"], "train.lr='abc' is not valid; it must be a number"),
        (["model.qk_norm=maybe"], "model.qk_norm='maybe' is not valid; it must be true or false"),
    ],
)
def test_a_value_its_type_cannot_take_is_one_line_saying_what_it_must_be(overrides, message):
    with pytest.raises(ConfigError) as err:
        plan(read_sweep(overrides, multirun=len(overrides[0].split(",")) > 1))
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    "override,start",
    [
        ("+train.foo=1", "train.foo: unknown key; valid keys under 'train': batch_size, betas,"),
        ("+train.step=1", "train.step: unknown key (did you mean train.steps?); valid keys under 'train'"),
        ("+model.n_head=2", "model.n_head: unknown key (did you mean model.n_heads?); valid keys"),
        ("+task.seq_le=3", "task.seq_le: unknown key (did you mean task.seq_len?); valid keys under 'task'"),
        ("+foo=1", "foo: unknown key; valid keys at the top level: attn, device, eval, model,"),
    ],
)
def test_an_unknown_key_added_with_plus_lists_the_valid_keys_and_the_closest(override, start):
    with pytest.raises(ConfigError) as err:
        plan(read_sweep([override], multirun=False))
    said = str(err.value)
    assert said.startswith(start) and "\n" not in said


def test_the_command_says_it_in_sinkexps_words_and_exits_2(tmp_path):
    result = sinkexp("train", "+train.foo=1", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("sinkexp: error: train.foo: unknown key; valid keys")
    assert len(result.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())
