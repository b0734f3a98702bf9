"""`sinkexp export RUN_DIR [OUT]`: a finished run of the LLaMA-style preset (model=llama, e.g.
task=lm) as a Hugging Face LlamaForCausalLM folder (config.json, model.safetensors and, for
task=lm, a byte-level tokenizer), so that `sinkexp measure OUT` and any transformers code read it.

The conversion is exact because the two models compute the same function (docs/measure.md):
- RoPE: sinkexp rotates channel pairs (i, i + D/2) with frequency 10000^(-2i/D) from position 0
  (model/attention.py `rotary`), which is transformers' `rotate_half` convention, so q and k need
  no permutation;
- RMSNorm: torch's nn.RMSNorm with eps=None uses float32's machine epsilon, so rms_norm_eps is
  that epsilon (1.19e-07), not Llama's 1e-6;
- SwiGLU: w1 (gate), w3 (up), w2 (down) are gate_proj, up_proj, down_proj, hidden int(8 d / 3);
- qkv's rows are q, k, v, each (H * D) with heads in order, as q_proj, k_proj, v_proj;
- untied embedding and readout (tie_word_embeddings false); the final RMSNorm is model.norm;
- task=lm's BOS is token 256 (bos_token_id), added by the tokenizer when the run had task.bos.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from sinkexp.analysis.load import load_run
from sinkexp.commands import COMMANDS
from sinkexp.config.arguments import read
from sinkexp.config.helptext import help_text
from sinkexp.config.schema import value_of
from sinkexp.config.validate import from_dictconfig
from sinkexp.errors import ConfigError, refuse
from sinkexp.rundir.files import CONFIG, META, read_json
from sinkexp.rundir.reading import FINISHED, RunFiles, measured_run, run_status

# The run's settings a LlamaForCausalLM computes (anything else has no equivalent there).
LLAMA = {
    "model.norm": "pre",
    "model.norm_type": "rmsnorm",
    "model.mlp": "swiglu",
    "model.pos": "rope",
    "model.bias": False,
    "model.mlp_bias": (None, False),
    "model.final_norm": True,
    "model.residual": True,
    "model.qk_norm": False,
    "model.n_registers": 0,
    "model.bos_vector": False,
    "model.embed_norm": False,
    "model.hide_bos": False,
    "model.readout": "linear",
    "model.global_pathway": "none",
    "model.pos_into": "stream",
    "attn.normaliser": "softmax",
    "attn.slot": "none",
    "attn.gate": "none",
}
BOS_TOKEN = "<bos>"


def check_run(run_dir: Path):
    """The finished run's config, if a LlamaForCausalLM computes its model (ConfigError otherwise)."""
    if not (run_dir / CONFIG).is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {CONFIG})")
    state, reason = run_status(run_dir)
    if state == "damaged":
        raise ConfigError(f"{run_dir} is damaged: {reason}; train it again into another folder to export it")
    if state not in FINISHED:
        raise ConfigError(f"{run_dir} is not a finished run ({state}); export a finished one")
    config = RunFiles(run_dir).config
    if measured_run(run_dir, config):
        raise ConfigError(measured_run(run_dir, config))
    cfg = from_dictconfig(config)
    for key, wanted in LLAMA.items():
        value = value_of(cfg, key)
        if value not in (wanted if isinstance(wanted, tuple) else (wanted,)):
            raise ConfigError(
                f"{run_dir}: {key}={value} has no LlamaForCausalLM equivalent; export needs the "
                f"model=llama preset with attn=softmax ({key}={wanted})"
            )
    return cfg


def llama_config(cfg, task, step: int, run_dir: Path, digest: str):
    from transformers import LlamaConfig  # lazy: transformers is the hf extra

    m = cfg.model
    bos = 256 if cfg.task.name == "lm" else None
    return LlamaConfig(
        vocab_size=task.vocab_size,
        hidden_size=m.d_model,
        intermediate_size=int(8 * m.d_model / 3),
        num_hidden_layers=m.n_layers,
        num_attention_heads=m.n_heads,
        num_key_value_heads=m.n_heads,
        head_dim=m.d_model // m.n_heads,
        max_position_embeddings=task.seq_len,
        rms_norm_eps=torch.finfo(torch.float32).eps,
        hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=bos,
        eos_token_id=None,
        pad_token_id=None,
        sinkexp={"run": str(run_dir), "config_hash": digest, "step": step, "task": cfg.task.name},
    )


def llama_weights(state: dict, n_layers: int) -> dict:
    """sinkexp's state dict under LlamaForCausalLM's names (every tensor used once)."""
    out = {
        "model.embed_tokens.weight": state.pop("embed_in.weight"),
        "model.norm.weight": state.pop("final_norm.weight"),
        "lm_head.weight": state.pop("readout.weight"),
    }
    for i in range(n_layers):
        ours, theirs = f"blocks.{i}.", f"model.layers.{i}."
        q, k, v = state.pop(ours + "attn.qkv.weight").chunk(3, dim=0)
        out.update(
            {
                theirs + "self_attn.q_proj.weight": q,
                theirs + "self_attn.k_proj.weight": k,
                theirs + "self_attn.v_proj.weight": v,
                theirs + "self_attn.o_proj.weight": state.pop(ours + "attn.out.weight"),
                theirs + "input_layernorm.weight": state.pop(ours + "norms_in.0.weight"),
                theirs + "post_attention_layernorm.weight": state.pop(ours + "norms_in.1.weight"),
                theirs + "mlp.gate_proj.weight": state.pop(ours + "mlp.w1.weight"),
                theirs + "mlp.up_proj.weight": state.pop(ours + "mlp.w3.weight"),
                theirs + "mlp.down_proj.weight": state.pop(ours + "mlp.w2.weight"),
            }
        )
    if state:
        raise ConfigError(f"weights without a LlamaForCausalLM place: {', '.join(sorted(state))}")
    return {name: tensor.contiguous() for name, tensor in out.items()}


def byte_tokenizer(bos: bool):
    """Bytes as tokens (id = byte value) and <bos> = 256, put in front of every text when `bos`:
    task=lm's tokens. A byte-level BPE without merges: every byte is one token."""
    # lazy: tokenizers and transformers are the hf extra
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {char: byte for byte, char in bytes_to_unicode().items()}
    vocab[BOS_TOKEN] = 256
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS_TOKEN} $A", special_tokens=[(BOS_TOKEN, 256)]
        )
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS_TOKEN)


def export(run_dir: Path, out: Path) -> Path:
    """Write the run's model into `out` (a new folder, written whole or not at all)."""
    from transformers import LlamaForCausalLM  # lazy: transformers is the hf extra
    from transformers.utils import logging

    logging.disable_progress_bar()
    run_dir = Path(run_dir).resolve()
    cfg = check_run(run_dir)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty; choose another OUT")
    run = load_run(run_dir)
    model = LlamaForCausalLM(llama_config(cfg, run.task, run.step, run_dir, read_json(run_dir / META)["config_hash"]))
    model.load_state_dict(llama_weights(dict(run.model.state_dict()), cfg.model.n_layers), strict=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        model.save_pretrained(staging)
        if cfg.task.name == "lm":
            byte_tokenizer(cfg.task.bos).save_pretrained(staging)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    try:
        given = read(COMMANDS["export"], argv)
        if given.help:
            print(help_text(COMMANDS["export"]))
            return 0
        cfg = given.flags
        run_dir = Path(cfg.run)
        out = Path(cfg.out or Path("outputs/export") / run_dir.resolve().name)
        print(f"exported {run_dir} to {export(run_dir, out)}")
    except ConfigError as err:
        return refuse(err)
    return 0
