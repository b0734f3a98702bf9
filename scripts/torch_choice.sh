#!/usr/bin/env bash
# The torch scripts/setup.sh installs on this machine: pip's arguments on one line (stdout), and why,
# where it is not the plain pin, on stderr. `bash scripts/torch_choice.sh` shows the choice.
#
# Always TORCH_VERSION, the version the tests run on (tests/scripts/test_setup.py checks this logic):
# - no nvidia-smi, or one that fails (no driver loaded): torch==TORCH_VERSION (on the project's CPU
#   machines the local CPU build; elsewhere PyPI's build, which runs on the CPU too);
# - a driver for CUDA 13 or newer (nvidia-smi's "CUDA Version"): torch==TORCH_VERSION from PyPI, whose
#   Linux wheel is built for CUDA 13.0 (its metadata requires cuda-toolkit 13.0.3);
# - a driver for CUDA 12.x: the same version built for CUDA 12.8 from PyTorch's own index (CUDA's
#   minor-version compatibility runs a 12.8 build on any 12.x driver; that index's 2.13.0 variants
#   were not checked from here, which reaches PyPI only);
# - an older driver: no build of TORCH_VERSION runs on it; one line, exit 1.
# SINKEXP_TORCH="ARGS" replaces the choice (e.g. another index).
set -euo pipefail
TORCH_VERSION=2.13.0
CUDA12_INDEX=https://download.pytorch.org/whl/cu128

if [ -n "${SINKEXP_TORCH:-}" ]; then
  echo "$SINKEXP_TORCH"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "torch==$TORCH_VERSION"
  exit 0
fi
if ! report=$(nvidia-smi 2>&1) || ! [[ $report =~ CUDA\ Version:\ *([0-9]+)\.([0-9]+) ]]; then
  echo "setup: nvidia-smi is here but reports no working driver; torch==$TORCH_VERSION (trains on the CPU until the driver works)" >&2
  echo "torch==$TORCH_VERSION"
  exit 0
fi
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}
if [ "$major" -ge 13 ]; then
  echo "torch==$TORCH_VERSION"
elif [ "$major" -eq 12 ]; then
  echo "setup: the NVIDIA driver runs CUDA $major.$minor; torch $TORCH_VERSION built for CUDA 12.8 ($CUDA12_INDEX)" >&2
  echo "torch==$TORCH_VERSION --index-url $CUDA12_INDEX"
else
  echo "setup: the NVIDIA driver runs CUDA $major.$minor, older than any build of torch $TORCH_VERSION (CUDA 12 or 13);" \
       "update the driver, or give SINKEXP_TORCH=\"pip arguments\" for a torch that runs on it" >&2
  exit 1
fi
