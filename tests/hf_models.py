"""Tiny Hugging Face causal LMs built from configs (no download), saved with task=lm's byte tokenizer:
the models tests/hf/ measures and tests/reproduce/test_checkpoint_claims.py stands in for named checkpoints."""

import torch

from sinkexp.hf.export import byte_tokenizer

SIZES = dict(vocab_size=257, hidden_size=16, num_attention_heads=2, num_hidden_layers=2, max_position_embeddings=32)


def config(kind: str, **changes):
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    if kind == "gpt2":
        return GPT2Config(
            vocab_size=257,
            n_embd=16,
            n_head=2,
            n_layer=2,
            n_positions=32,
            bos_token_id=256,
            eos_token_id=256,
            **changes,
        )
    if kind == "gpt_neox":
        return GPTNeoXConfig(**SIZES, intermediate_size=32, bos_token_id=256, eos_token_id=256, **changes)
    return LlamaConfig(
        **{**SIZES, "num_attention_heads": 4},
        num_key_value_heads=2,
        intermediate_size=32,
        bos_token_id=256,
        eos_token_id=None,
        **changes,
    )  # grouped-query: 4 query heads, 2 kv


def save(model, folder, bos: bool):
    model.save_pretrained(folder)
    byte_tokenizer(bos).save_pretrained(folder)
    return folder


def tiny(kind: str, folder, seed: int = 0, edit=None, **changes):
    """A randomly initialised `kind` model (GPT-2, GPT-NeoX or grouped-query Llama) saved in `folder`
    with task=lm's byte tokenizer (a BOS in front of every text for Llama, as Llama's own does)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config(kind, **changes))
    if edit is not None:
        with torch.no_grad():
            edit(model)
    return save(model, folder, bos=kind == "llama")


KINDS = ("gpt2", "gpt_neox", "llama")


def sink_at_position_zero(model):
    """GPT-2 whose every head attends to position 0 alone: token embeddings 0, position 0's a large
    +-1 pattern e (its LayerNorm is e, every other position's is 0), W_K maps e to all-ones keys and a
    query bias of 100 gives position 0 a score of 100 * 8 / sqrt(8) = 283 over 0 elsewhere (e^-283
    is 0 in float32); the heads and MLPs write nothing, so every layer sees the same stream."""
    e = torch.tensor([1.0, -1.0] * 8)
    model.transformer.wte.weight.zero_()
    model.transformer.wpe.weight.zero_()
    model.transformer.wpe.weight[0] = 1000 * e
    for block in model.transformer.h:
        block.attn.c_attn.weight.zero_()
        block.attn.c_attn.bias.zero_()
        block.attn.c_attn.weight[:, 16:32] = torch.outer(e, torch.ones(16)) / 16
        block.attn.c_attn.bias[:16] = 100.0
        for projection in (block.attn.c_proj, block.mlp.c_proj):
            projection.weight.zero_()
            projection.bias.zero_()
