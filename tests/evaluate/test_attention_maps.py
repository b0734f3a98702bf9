"""attention.npz's maps (evaluator.mean_attention): the batch mean, the per-query-type means that
average back to it, the shares for variants whose rows do not sum to 1, and each sequence's own
maps when the sink moves between sequences."""

import numpy as np
import torch

from sinkexp.config.schema import AttnConfig, ModelConfig
from sinkexp.evaluate.evaluator import EXAMPLES, captured_forward, mean_attention
from sinkexp.model import Transformer
from sinkexp.tasks.trigger import TriggerConfig, TriggerTask
from tests.helpers import make_model, sample

TASK = TriggerTask(TriggerConfig(seq_len=10, d_x=4))  # make_model's task


def weights_of(model, batch) -> list[np.ndarray]:
    """Each layer's captured attention weights (B, H, T, T), read independently of mean_attention."""
    names = [f"blocks.{layer}.attn.weights" for layer in range(len(model.blocks))]
    _, cache = captured_forward(model, batch.inputs, names)
    return [cache[name].detach().numpy() for name in names]


def test_the_query_types_maps_average_back_to_the_batch_mean_and_are_nan_where_no_query_of_the_type_sits():
    model, task = make_model(), TASK
    batch = sample(task, seed=0, batch_size=16)
    maps = mean_attention(model, batch, task.query_types)
    assert list(maps["query_types"]) == list(task.query_types) and int(maps["sink"]) == 0
    types = batch.query_type.numpy()  # (B, T)
    for layer, weights in enumerate(weights_of(model, batch)):
        np.testing.assert_allclose(maps[f"layer{layer}"], weights.mean(0), rtol=1e-6)
        by_type = maps[f"type_layer{layer}"]  # (Q, H, T, T)
        counts = np.stack([(types == q).sum(0) for q in range(len(task.query_types))])  # (Q, T)
        assert (np.isnan(by_type).all(axis=(1, 3)) == (counts == 0)).all()  # (Q, T): a whole row, or none
        assert (np.isnan(by_type).any(axis=(1, 3)) == (counts == 0)).all() and (counts == 0).any()
        typed = (types >= 0).all(0)  # positions that are a query in every sequence
        pooled = np.nansum(counts[:, None, :, None] * by_type, axis=0) / len(types)
        np.testing.assert_allclose(pooled[:, typed], weights.mean(0)[:, typed], rtol=1e-5, atol=1e-7)
        for q in range(len(task.query_types)):  # one query row by hand
            t = int(np.flatnonzero(counts[q])[0])
            np.testing.assert_allclose(by_type[q, :, t], weights[types[:, t] == q][:, :, t].mean(0), rtol=1e-6)
    assert not any(name.startswith("share_") or name.startswith("example") for name in maps)  # softmax, BOS


def test_sigmoid_maps_come_with_their_shares_rows_summing_to_one():
    model = make_model(attn="sigmoid")
    batch = sample(TASK, seed=1, batch_size=8)
    maps = mean_attention(model, batch, TASK.query_types)
    for layer, weights in enumerate(weights_of(model, batch)):
        share = weights / weights.sum(-1, keepdims=True)
        np.testing.assert_allclose(maps[f"share_layer{layer}"], share.mean(0), rtol=1e-5)
        np.testing.assert_allclose(maps[f"share_layer{layer}"].sum(-1), 1.0, rtol=1e-5)
        assert maps[f"share_type_layer{layer}"].shape == maps[f"type_layer{layer}"].shape
        assert not np.allclose(maps[f"layer{layer}"].sum(-1), 1.0)  # the raw weights: rows do not sum to 1


def test_a_moving_sink_keeps_each_examples_own_map_and_sink():
    from sinkexp.tasks.broadcast import BroadcastConfig, BroadcastTask

    torch.manual_seed(0)
    task = BroadcastTask(BroadcastConfig(seq_len=6, d=8))
    cfg = ModelConfig(n_layers=2, d_model=8, mlp="gelu", embed="identity", readout="identity")
    model = Transformer(cfg, AttnConfig(), task)
    batch = sample(task, seed=0, batch_size=EXAMPLES + 3)
    assert len(batch.sink.unique()) > 1  # the hub moves in this draw
    maps = mean_attention(model, batch, task.query_types)
    assert int(maps["sink"]) == -1 and maps["example_sink"].tolist() == batch.sink[:EXAMPLES].tolist()
    assert "query_types" not in maps  # one query type: the batch mean is its map
    for layer, weights in enumerate(weights_of(model, batch)):
        np.testing.assert_array_equal(maps[f"example_layer{layer}"], weights[:EXAMPLES])
