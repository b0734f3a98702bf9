"""The evaluator: hand-built captured tensors -> the expected rows, and rows -> the final values
that summary.json, the printed table and the report share."""

import pytest
import torch

from sinkexp.evaluate.evaluator import attention_rows, evaluate, loss_rows, once_per_query_set
from sinkexp.evaluate.metrics.head_writes import head_values, stable_rank
from sinkexp.evaluate.tables import final_rows, summary
from sinkexp.model.transformer import Anatomy, LayerAnatomy
from sinkexp.tasks.base import Batch

# One sequence of 4 tokens (BOS + 3), one causal head. Query 1 is of type "a", 2 and 3 of type "b".
WEIGHTS = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.6, 0.4, 0.0, 0.0], [0.1, 0.6, 0.2, 0.1]]).view(
    1, 1, 4, 4
)
V = torch.tensor([[0.5, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 1.0]]).view(1, 1, 4, 2)  # |v| = 0.5, 1, 2, 1
RESID = torch.tensor([[3.0, 4.0], [0.0, 1.0], [0.0, 2.0], [1.0, 0.0]]).view(1, 4, 2)
BATCH = Batch(
    inputs=torch.zeros(1, 4, 2),
    targets=torch.zeros(1, 4, 2),
    loss_mask=torch.tensor([[False, True, True, True]]),
    query_type=torch.tensor([[-1, 0, 1, 1]]),
    sink=torch.tensor([0]),
)


# W_O = I, so the layer writes (A V) per token: (0.5, 0), (0.5, 0), (0.7, 0), (0.65, 0.5)
OUTPUT = (WEIGHTS @ V)[:, 0]  # (1, 4, 2)
MEAN_WRITE = torch.tensor([(0.5 + 0.5 + 0.7 + 0.65) / 4, 0.5 / 4])  # mean over the 4 tokens
OUTPUT_MS = (0.25 + 0.25 + 0.49 + 0.65**2 + 0.25) / 8  # mean squared entry


def hand_built_rows(pathway: bool = False):
    scores = torch.zeros(1, 1, 4, 4)
    scores[..., 0] = 2.0  # the sink scores 2 above every other key
    cache = {
        "blocks.0.attn.scores": scores,
        "blocks.0.attn.weights": WEIGHTS,
        "blocks.0.attn.k": V,
        "blocks.0.attn.v": V,
        "blocks.0.attn.mixed": WEIGHTS @ V,
        "blocks.0.attn.output": OUTPUT,
        "blocks.0.resid_post": RESID,
        "blocks.0.pathway.output": torch.ones(1, 4, 2),
    }  # a global pathway writing (1, 1) everywhere
    eye = torch.eye(2)
    anatomy = Anatomy(
        tokens=torch.arange(4),
        registers=torch.arange(0),
        n_keys=4,
        visible=torch.ones(4, 4, dtype=torch.bool).tril(),
        layers=[LayerAnatomy(1, w_q=eye, w_k=eye, w_o=eye, has_slot=False, has_gate=False, has_pathway=pathway)],
    )
    rows = attention_rows(cache, anatomy, BATCH, ("a", "b"), step=7)
    return {(layer, head, query_type, metric): value for step, layer, head, query_type, metric, value in rows}


@pytest.mark.parametrize(
    "key,expected",
    [
        ((0, 0, "a", "sink_attn"), 1.0),
        ((0, 0, "b", "sink_attn"), (0.6 + 0.1) / 2),
        ((0, 0, "all", "sink_attn"), (1.0 + 0.6 + 0.1) / 3),
        ((0, 0, "b", "sink_share"), (0.6 + 0.1) / 2),  # rows sum to 1: the share is the weight
        ((0, 0, "b", "max_inflow"), (0.4 + 0.6) / 2),  # key 1 receives the most from type b
        ((0, 0, "a", "sink_match"), 1.0),
        ((0, 0, "b", "sink_match"), 0.5),  # query 3's argmax is key 1
        ((0, 0, "b", "logit_gap"), 2.0),
        ((0, 0, "all", "sink_score"), (1.0 + 1.0 + 0.6 + 0.1) / 4),  # query 0 included
        ((0, -1, "all", "sink_rate@0.3"), 1.0),
        ((0, -1, "all", "sink_rate@0.8"), 0.0),
        ((-1, -1, "all", "sink_rate@0.3"), 1.0),
        ((0, 0, "all", "value_norm_ratio"), 0.5 / ((1 + 2 + 1) / 3)),
        ((0, 0, "all", "sink_value_norm"), 0.5),
        ((0, 0, "all", "sink_key_cos"), 1.0),  # one sequence: every key is its own mean
        ((0, 0, "all", "key_cos_rest"), 1.0),
        ((0, -1, "all", "resid_norm_sink"), 5.0),
        ((0, -1, "all", "resid_norm_rest"), (1 + 2 + 1) / 3),
        ((0, -1, "all", "massive_ratio"), 4.0 / 1.0),  # max 4, median of |entries| 1
        ((0, -1, "all", "common_mode"), MEAN_WRITE.pow(2).mean().item() / OUTPUT_MS),
    ],
)
def test_attention_rows_of_a_hand_built_capture(key, expected):
    assert hand_built_rows()[key] == pytest.approx(expected, rel=1e-6)


def test_a_global_pathway_gets_its_own_rows():
    assert not any(metric.startswith("pathway") for *_, metric in hand_built_rows())
    rows = hand_built_rows(pathway=True)
    assert rows[(0, -1, "all", "pathway_common_mode")] == pytest.approx(1.0)  # the same write everywhere
    assert rows[(0, -1, "all", "pathway_usage")] == pytest.approx(1.0 / OUTPUT_MS**0.5)  # RMS 1 over RMS(O)
    assert rows[(0, -1, "all", "common_mode")] == hand_built_rows()[(0, -1, "all", "common_mode")]


def test_undefined_values_are_left_out_and_wired_metrics_match_their_functions():
    rows = hand_built_rows()
    assert (0, 0, "a", "logit_gap") not in rows  # query 1 sees only the sink and itself
    assert not any(metric in ("slot_attn", "register_attn", "gate") for *_, metric in rows)
    expected_rank = stable_rank(head_values(WEIGHTS @ V, torch.eye(2))).item()
    assert rows[(0, 0, "all", "stable_rank")] == pytest.approx(expected_rank)
    assert rows[(0, 0, "all", "qk_sigma1")] == pytest.approx(1.0)  # W_Q W_K^T = I


class Halves:
    """A task whose per-position loss is the prediction itself and whose reference loses 1 everywhere."""

    query_types = ("a", "b")

    def loss(self, pred, batch):
        return pred

    def baseline_loss(self, batch):
        return torch.ones_like(batch.loss_mask, dtype=torch.float)


def test_loss_rows_average_over_each_query_type_within_the_loss_mask():
    pred = torch.tensor([[100.0, 0.5, 1.0, 2.0]])  # position 0 is outside the loss mask
    rows = {split: loss for step, split, loss in loss_rows(Halves(), pred, BATCH, step=3)}
    assert rows == {
        "eval/a": 0.5,
        "eval/b": 1.5,
        "eval/all": pytest.approx(3.5 / 3),
        "baseline/a": 1.0,
        "baseline/b": 1.0,
        "baseline/all": 1.0,
    }


def test_final_rows_average_heads_at_the_last_step_and_feed_the_summary():
    metrics = [
        (0, 0, 0, "a", "sink_attn", 0.1),
        (10, 0, 0, "a", "sink_attn", 0.8),
        (10, 0, 1, "a", "sink_attn", 0.6),
        (10, -1, -1, "all", "sink_rate@0.3", 0.5),
        (10, 0, -1, "all", "sink_rate@0.3", 0.5),
        (10, 0, -1, "all", "sink_rate@0.8", 0.0),
    ]
    losses = [(0, "eval/a", 9.0), (10, "train", 2.0), (10, "eval/a", 0.25), (10, "baseline/a", 1.0)]
    final = final_rows(metrics, losses)
    values = {(layer, q, metric): value for layer, q, metric, value in final}
    assert values[(0, "a", "sink_attn")] == pytest.approx(0.7)  # mean over the two heads at step 10
    assert values[(-1, "a", "loss_eval")] == 0.25 and values[(-1, "a", "loss_baseline")] == 1.0
    assert len(final) == 6  # 4 metric groups and 2 losses: step 0's rows and the train loss are not final
    result = summary(final, 10, ("a",), "zero predictor")
    assert result["step"] == 10 and result["loss"] == {"a": 0.25} and result["baseline_loss"] == {"a": 1.0}
    assert result["sink_attn"] == {"0": {"a": pytest.approx(0.7)}}
    assert result["sink_rate"] == {"0": {"0.3": 0.5, "0.8": 0.0}, "model": {"0.3": 0.5}}


def test_evaluate_looks_at_the_task_tokens_of_a_model_with_registers_and_a_slot(make_config):
    """The model's sequence is BOS, 2 registers, then the task's tokens; its keys end with the slot."""
    from sinkexp.jobs.runner import make_trainer
    from sinkexp.model import capture

    cfg = make_config("model.n_registers=2", "attn=sink_kv", "model.n_heads=2")
    (task,), trainer = make_trainer([cfg], torch.device("cpu"))
    batch = task.sample(8, torch.Generator().manual_seed(0), "cpu")
    rows, losses = evaluate(trainer.model, task, batch, 0)
    by_key = {(r[1], r[2], r[3], r[4]): r[5] for r in rows}
    with capture(trainer.model, ["blocks.0.attn.weights"]) as cache:
        trainer.model.eval()(batch.inputs)
    weights = cache["blocks.0.attn.weights"]  # (B, H, T + 2, T + 2 + 1)
    tokens = torch.tensor([0] + list(range(3, weights.shape[2])))
    queries = weights[:, :, tokens][:, :, batch.query_type[0] >= 0]  # task queries, all positions alike
    for head in (0, 1):
        assert by_key[(0, head, "all", "sink_attn")] == pytest.approx(queries[:, head, :, 0].mean().item(), rel=1e-5)
        assert by_key[(0, head, "all", "register_attn")] == pytest.approx(
            queries[:, head, :, 1:3].sum(-1).mean().item(), rel=1e-5
        )
        assert by_key[(0, head, "all", "slot_attn")] == pytest.approx(queries[:, head, :, -1].mean().item(), rel=1e-5)
    assert {split for _, split, _ in losses} >= {"eval/trigger", "baseline/non_trigger"}


def test_the_printed_table_fits_100_columns_and_says_where_a_sink_formed():
    from sinkexp.evaluate.tables import format_summary

    layers = {str(layer): {"trigger": 0.01, "non_trigger": 0.99 if layer == 1 else 0.1} for layer in range(12)}
    summary = {
        "step": 300,
        "reference": "zero predictor",
        "query_types": ["trigger", "non_trigger"],
        "loss": {"trigger": 0.1, "non_trigger": 0.01, "all": 0.02},
        "baseline_loss": {"trigger": 0.2, "non_trigger": 0.0, "all": 0.05},
        "sink_attn": layers,
        "sink_rate": {layer: {"0.3": 1.0 if layer == "1" else 0.0, "0.8": 0.0} for layer in layers},
        "metrics": {
            "sink_score": {layer: {"all": 0.9 if layer == "1" else 0.1} for layer in layers},
            "massive_ratio": {layer: {"all": 392.3239} for layer in layers},
        },
    }
    text = format_summary(summary)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "layer 1: sink formed in 100% of heads" in text and "layer 0: no sink" in text
    assert "392.3" in text and "392.3239" not in text  # four significant digits
    assert "(mean over heads)" in text.splitlines()[0] and text.count("(mean over heads)") == 2  # wrapped
    assert "trigger" in text and "50.0%" in text  # model / reference of the trigger loss


def test_head_cancellation_is_written_for_several_heads_only():
    """Two heads attending alike, whose W_O^h are I and -I: every query's writes cancel exactly."""
    assert not any(metric == "head_cancellation" for *_, metric in hand_built_rows())
    eye = torch.eye(2)
    weights, v = WEIGHTS.expand(1, 2, 4, 4), V.expand(1, 2, 4, 2)
    cache = {
        "blocks.0.attn.scores": torch.zeros(1, 2, 4, 4),
        "blocks.0.attn.weights": weights,
        "blocks.0.attn.k": v,
        "blocks.0.attn.v": v,
        "blocks.0.attn.mixed": weights @ v,
        "blocks.0.resid_post": RESID,
        "blocks.0.attn.output": torch.zeros(1, 4, 2),
    }  # the heads' writes cancel
    anatomy = Anatomy(
        tokens=torch.arange(4),
        registers=torch.arange(0),
        n_keys=4,
        visible=torch.ones(4, 4, dtype=torch.bool).tril(),
        layers=[
            LayerAnatomy(
                2,
                w_q=torch.cat([eye, eye]),
                w_k=torch.cat([eye, eye]),
                w_o=torch.cat([eye, -eye], dim=1),
                has_slot=False,
                has_gate=False,
                has_pathway=False,
            )
        ],
    )
    rows = {
        (layer, head, query_type, metric): value
        for step, layer, head, query_type, metric, value in attention_rows(cache, anatomy, BATCH, ("a", "b"), 0)
    }
    for query_type in ("a", "b", "all"):
        assert rows[(0, -1, query_type, "head_cancellation")] == pytest.approx(0.0, abs=1e-7)


def test_the_evaluator_writes_exactly_the_registered_metrics(make_config):
    """Over models that have every optional part, the evaluator writes every name in the registry a
    claim may name (evaluate/tables.py METRICS), and no other; the losses become loss_eval/baseline."""
    from sinkexp.evaluate.tables import MEASURE_ONLY, METRICS
    from sinkexp.jobs.runner import make_trainer

    written = set()
    for overrides in (
        ("model.n_registers=1", "attn=sink_kv", "model.n_heads=2"),
        ("attn=gated",),
        ("task=broadcast", "model.global_pathway=learned"),
    ):
        (task,), trainer = make_trainer([make_config(*overrides, "device=cpu")], torch.device("cpu"))
        rows, losses = evaluate(trainer.model, task, task.sample(8, torch.Generator().manual_seed(0), "cpu"), 0)
        written |= {metric for *_, metric, _ in rows}
        written |= {metric for _, _, metric, _ in final_rows(rows, losses)}
    assert written == set(METRICS) - set(MEASURE_ONLY)  # those: sinkexp measure perturb=true


def test_query_types_that_select_the_same_queries_are_computed_once():
    """An LM's `text` and `all` select the same queries: one computation serves both, in the
    query types' order; a type with other queries gets its own."""
    text = torch.tensor([[False, True, True]])
    calls = []
    values = once_per_query_set(
        {"text": text, "other": ~text, "all": text.clone()}, lambda queries: calls.append(queries) or len(calls)
    )
    assert values == {"text": 1, "other": 2, "all": 1} and len(calls) == 2
