"""The Hydra launcher a command chose, read once from its composed config and passed down.

`plan` reads it from the config without sweeps (`Launcher.of(master)`); the memory check
(jobs/memory.py) and `launch` (jobs/launch.py) take it from there, so no one parses the command
line for it again. Hydra's basic launcher runs the jobs here, one after another; joblib's run here
at once (hydra.launcher.n_jobs of them, -1: one per core); submitit's Slurm launcher runs them on
other machines, its local one here.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

BASIC = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


@dataclass(frozen=True)
class Launcher:
    target: str = BASIC  # hydra.launcher._target_
    n_jobs: int = -1  # joblib's jobs at once (-1: one per usable core)

    @classmethod
    def of(cls, composed: DictConfig) -> Launcher:
        """The launcher of a composed config (its hydra node)."""
        node = composed.hydra.launcher
        return cls(str(node.get("_target_", BASIC)), int(node.get("n_jobs", -1) or -1))

    @property
    def basic(self) -> bool:
        return self.target == BASIC

    @property
    def parallel(self) -> bool:
        """Jobs at once on this machine (joblib)."""
        return "joblib" in self.target

    @property
    def elsewhere(self) -> bool:
        """Jobs on other machines (submitit's Slurm launcher)."""
        return self.target.endswith("SlurmLauncher")
