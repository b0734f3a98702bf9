#!/usr/bin/env bash
# The CUDA checks as one prepared script, for a machine with a GPU (sized for about 8 minutes on
# one H200): tests/machine/test_gpu.py and test_two_gpus.py, then scripts/bench_gpu.py at a reduced
# size; logs and the benchmark's JSON go to $OUT (the device tool's folder) or ./gpu_check/;
# docs/performance.md takes the numbers.
#
#   bash scripts/gpu_check.sh --wheels   # here, with PyPI: .whl/ (ignored by git) gets the pure-Python
#                                        # packages a CUDA image may lack (hydra-core, omegaconf, antlr4)
#   bash scripts/gpu_check.sh            # there (carry .whl); PYTHON=.venv/bin/python where .venv has a CUDA torch
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ "${1:-}" = "--wheels" ]; then
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
  "$PY" -m pip wheel -q --no-deps -w .whl hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3
  exit
fi
out=${OUT:-gpu_check}
mkdir -p "$out"
if [ -d .whl ] && ! "$PY" -c "import hydra, omegaconf" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
"$PY" -c "import sinkexp.conf" 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
"$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || { echo "gpu_check: torch sees no GPU" >&2; exit 1; }
export PYTHONUNBUFFERED=1
{ nvidia-smi; "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())"
} 2>&1 | tee "$out/machine.txt"
started=$SECONDS
timeout 330 "$PY" -m pytest tests/machine/test_gpu.py tests/machine/test_two_gpus.py -n 0 -q -rs -p no:cacheprovider --durations=15 2>&1 | tee "$out/test_gpu.log"
tests=${PIPESTATUS[0]}
echo "tests/machine/test_gpu.py: exit $tests after $((SECONDS - started)) s" | tee -a "$out/test_gpu.log"
started=$SECONDS
timeout 170 "$PY" scripts/bench_gpu.py --ks 1,8,64 --chunks 1,32 --seconds 2 --damping-steps 5000 \
  --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.log"
bench=${PIPESTATUS[0]}
echo "scripts/bench_gpu.py: exit $bench after $((SECONDS - started)) s" | tee -a "$out/bench_gpu.log"
[ "$tests" -eq 0 ] && [ "$bench" -eq 0 ]
