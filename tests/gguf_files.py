"""Tiny GGUF files written with the gguf package's own writer (gguf.GGUFWriter), as llama.cpp's
convert_hf_to_gguf.py lays them out: a randomly initialised transformers model's tensors under
GGUF's names (gguf.get_tensor_name_map), Llama's q/k rows permuted for llama.cpp's RoPE, Gemma's
norm gains stored as 1 + weight, each 2-D weight quantized to the chosen type, and a byte-level
tokenizer in the metadata. tests/hf/test_gguf.py loads them through `sinkexp measure`'s own path.

    model, path = write("llama", tmp_path / "tiny.gguf", kind="Q4_1")
"""

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q

VOCAB = 260  # 256 bytes and four specials; every row of 32 floats is one quantization block
ARCH = {"llama": gguf.MODEL_ARCH.LLAMA, "gemma3": gguf.MODEL_ARCH.GEMMA3}


def config(arch: str, **changes):
    from transformers import Gemma3TextConfig, LlamaConfig

    sizes = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    sizes.update(num_key_value_heads=2, max_position_embeddings=64, bos_token_id=VOCAB - 2, eos_token_id=VOCAB - 3)
    if arch == "llama":
        return LlamaConfig(**sizes, head_dim=8, rms_norm_eps=1e-5, tie_word_embeddings=False, **changes)
    return Gemma3TextConfig(**sizes, head_dim=32, **{"sliding_window": 8, **changes})


def model(arch: str, seed: int = 0, **changes):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    built = AutoModelForCausalLM.from_config(config(arch, **changes)).eval()
    with torch.no_grad():  # norm gains away from their initial 1 (Gemma: 0), so that mixing them up shows
        for name, parameter in built.named_parameters():
            if "norm" in name:
                parameter.add_(0.3 * torch.randn_like(parameter))
    return built


def gguf_tensor(arch: str, name: str, weight: np.ndarray, cfg) -> np.ndarray:
    """A transformers weight as llama.cpp stores it (the inverses of transformers' GGUF loading)."""
    if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
        heads = cfg.num_attention_heads if "q_proj" in name else cfg.num_key_value_heads
        return weight.reshape(heads, 2, weight.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(weight.shape)
    if arch == "gemma3" and "norm" in name:
        return weight + 1
    return weight


def write(arch: str, path, kind: str = "F32", seed: int = 0, writer_arch: str | None = None, **changes):
    """(the transformers model, path) with the model written to `path` as a GGUF of `arch`, its 2-D
    weights of type `kind` (F32, Q8_0, Q4_1, ... or Q8_K: bytes no dequantizer reads)."""
    built = model(arch, seed, **changes)
    cfg, names = built.config, gguf.get_tensor_name_map(ARCH[arch], built.config.num_hidden_layers)
    out = gguf.GGUFWriter(path, writer_arch or arch)
    metadata(out, arch, cfg, kind)
    for name, tensor in built.state_dict().items():
        if arch == "gemma3" and name == "lm_head.weight":
            continue  # tied to the embedding
        data = gguf_tensor(arch, name, tensor.numpy().astype(np.float32), cfg)
        target = names.get_name(name, try_suffixes=(".weight",))
        if data.ndim == 1 or kind == "F32":
            out.add_tensor(target, data)
        elif kind == "Q8_K":
            blocks = max(1, data.size // 256)  # one block of 256 weights: 292 bytes
            out.add_tensor(target, np.zeros((blocks, 292), np.uint8), raw_dtype=Q.Q8_K)
        else:
            out.add_tensor(target, gguf.quantize(data, Q[kind]), raw_dtype=Q[kind])  # its shape in bytes
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
    return built, path


def metadata(out, arch: str, cfg, kind: str) -> None:
    out.add_name(f"tiny {arch}")
    if f"MOSTLY_{kind}" in gguf.LlamaFileType.__members__ or kind == "F32":  # not Q8_K: no file type of its own
        out.add_file_type(gguf.LlamaFileType["ALL_F32" if kind == "F32" else f"MOSTLY_{kind}"])
    out.add_block_count(cfg.num_hidden_layers)
    out.add_context_length(cfg.max_position_embeddings)
    out.add_embedding_length(cfg.hidden_size)
    out.add_feed_forward_length(cfg.intermediate_size)
    out.add_head_count(cfg.num_attention_heads)
    out.add_head_count_kv(cfg.num_key_value_heads)
    out.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    out.add_rope_freq_base(10000.0 if arch == "llama" else 1e6)
    out.add_vocab_size(cfg.vocab_size)
    if arch == "llama":
        out.add_rope_dimension_count(cfg.head_dim)
        out.add_tokenizer_model("gpt2")
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        spelling = bytes_to_unicode()  # GPT-2's byte alphabet: byte b is spelt spelling[b]
        out.add_token_list([spelling[b] for b in range(256)] + ["<unk>", "<|endoftext|>", "<s>", "</s>"])
        out.add_token_types([1] * 256 + [3] * 4)
        out.add_token_scores([0.0] * VOCAB)  # no merges: each byte is a token
        out.add_add_bos_token(True)
    else:
        out.add_key_length(cfg.head_dim)
        out.add_value_length(cfg.head_dim)
        out.add_sliding_window(cfg.sliding_window)
        out.add_tokenizer_model("llama")
        out.add_token_list([f"<0x{b:02X}>" for b in range(256)] + ["<unk>", "<pad>", "<bos>", "<eos>"])
        out.add_token_scores([0.0] * VOCAB)
        out.add_token_types([6] * 256 + [3] * 4)
        out.add_add_bos_token(True)
    out.add_bos_token_id(VOCAB - 2)
    out.add_eos_token_id(VOCAB - 3)
    out.add_unk_token_id(VOCAB - 4)
