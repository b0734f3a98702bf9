"""scripts/torch_choice.sh: the torch scripts/setup.sh installs, from what nvidia-smi reports (a fake
nvidia-smi on PATH; nothing is installed)."""

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "torch_choice.sh"
TESTED = "torch==2.13.0"  # the version the suite runs on (scripts/setup.sh installs it here)
BANNER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: {cuda}     |
+-----------------------------------------+------------------------+----------------------+
|   0  NVIDIA H200                    On  |   00000000:18:00.0 Off |                    0 |"""


def choose(tmp_path, nvidia_smi: str | None, **env) -> subprocess.CompletedProcess:
    """Run the script with only `nvidia-smi` (this shell text, or none) on PATH: no other command."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    if nvidia_smi is not None:
        (fake / "nvidia-smi").write_text("#!/bin/sh\n" + nvidia_smi + "\n")
        (fake / "nvidia-smi").chmod(0o755)
    return subprocess.run(
        [shutil.which("bash"), str(SCRIPT)], capture_output=True, text=True, env={"PATH": str(fake), **env}
    )


def test_no_nvidia_smi_gets_the_tested_pin(tmp_path):
    chosen = choose(tmp_path, None)
    assert (chosen.returncode, chosen.stdout, chosen.stderr) == (0, f"{TESTED}\n", "")


@pytest.mark.parametrize("cuda", ["13.0", "13.2", "14.1"])
def test_a_cuda_13_driver_gets_the_tested_pin_from_pypi(tmp_path, cuda):
    """PyPI's torch 2.13.0 Linux wheel is built for CUDA 13.0 (it requires cuda-toolkit 13.0.3)."""
    chosen = choose(tmp_path, f"echo '{BANNER.format(cuda=cuda)}'")
    assert (chosen.returncode, chosen.stdout, chosen.stderr) == (0, f"{TESTED}\n", "")


@pytest.mark.parametrize("cuda", ["12.2", "12.8"])
def test_a_cuda_12_driver_gets_the_tested_version_built_for_cuda_12(tmp_path, cuda):
    chosen = choose(tmp_path, f"echo '{BANNER.format(cuda=cuda)}'")
    assert chosen.returncode == 0
    assert chosen.stdout == f"{TESTED} --index-url https://download.pytorch.org/whl/cu128\n"
    assert chosen.stderr.count("\n") == 1 and f"CUDA {cuda}" in chosen.stderr


def test_a_driver_too_old_for_any_build_is_refused_in_one_line(tmp_path):
    chosen = choose(tmp_path, f"echo '{BANNER.format(cuda='11.8')}'")
    assert chosen.returncode == 1 and chosen.stdout == ""
    assert chosen.stderr.count("\n") == 1 and "CUDA 11.8" in chosen.stderr and "SINKEXP_TORCH" in chosen.stderr


def test_an_nvidia_smi_without_a_driver_gets_the_pin_and_says_so(tmp_path):
    chosen = choose(
        tmp_path, "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9"
    )
    assert (chosen.returncode, chosen.stdout) == (0, f"{TESTED}\n")
    assert chosen.stderr.count("\n") == 1 and "no working driver" in chosen.stderr


def test_the_user_can_name_the_torch(tmp_path):
    chosen = choose(tmp_path, None, SINKEXP_TORCH="torch==2.13.0 --index-url https://example.invalid/cu126")
    assert chosen.stdout == "torch==2.13.0 --index-url https://example.invalid/cu126\n"


def test_setup_installs_the_choice():
    """setup.sh asks the script (no second copy of the logic) and pins what the suite runs on."""
    setup = (SCRIPT.parent / "setup.sh").read_text()
    assert "choice=$(bash scripts/torch_choice.sh)" in setup and "pip install -q $choice" in setup
    assert "pip install -q torch\n" not in setup
    import torch

    assert torch.__version__.split("+")[0] == TESTED.split("==")[1]
