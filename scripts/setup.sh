#!/usr/bin/env bash
# Create .venv and install sinkexp with its test tools and the hf extra (transformers, for
# `sinkexp measure`; it does not pull torch); safe to run again.
# torch: a machine with an NVIDIA driver gets PyPI's default (CUDA) build; any other machine gets
# torch==2.13.0, which on the project's CPU machines is the local CPU build (seconds, no download).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    .venv/bin/pip install -q torch
  else
    .venv/bin/pip install -q torch==2.13.0
  fi
fi
.venv/bin/pip install -q -e ".[dev,hf]"
