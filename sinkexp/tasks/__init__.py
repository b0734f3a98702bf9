"""Task registry and the `Batch` every sampler returns.

A task is one file with one class that has:
  Config            a dataclass (its `name` field is the registry key; YAML in configs/task/)
  query_types       names of the query types; `Batch.query_type` indexes into it (-1: not a query)
  causal            whether the model masks future keys
  has_bos           whether position 0 is a BOS/sink token (registers are inserted after it)
  input_dim / vocab_size, output_dim, seq_len   what the model's embedding and readout need
  validate(cfg)     raise ConfigError for impossible settings (a staticmethod)
  dims(cfg) -> Dims its sizes, without building it (a staticmethod; checked against the model and memory)
  sample(batch_size, generator, device) -> Batch
  sample_held_out   (optional) the same signature, for the evaluation batch (held-out data; default: sample)
  loss(pred, batch) -> (B, T) per-position loss
  reference         what baseline_loss measures (e.g. "zero predictor", "oracle")
  baseline_loss(batch) -> (B, T) per-position loss of that reference predictor
  data_files        (optional) task config keys naming data files (a path, or a name in
                    tasks.base.BUILT_IN), read with tasks.base.read_data_file; their content is part of the config hash
"""

from sinkexp.tasks.backcopy import BackcopyTask
from sinkexp.tasks.base import Batch
from sinkexp.tasks.broadcast import BroadcastTask
from sinkexp.tasks.damping import DampingTask
from sinkexp.tasks.lazy import torch
from sinkexp.tasks.lm import LMTask
from sinkexp.tasks.trigger import TriggerTask

__all__ = ["Batch", "TASKS", "held_out_batch"]

TASKS = {
    "trigger": TriggerTask,
    "damping": DampingTask,
    "broadcast": BroadcastTask,
    "backcopy": BackcopyTask,
    "lm": LMTask,
}


def held_out_batch(task, batch_size: int, seed: int, device):
    """The evaluation batch (eval.batch_size, eval.seed): from the task's held-out data where it has
    some (task=lm), else a fresh sample like any training batch."""
    draw = getattr(task, "sample_held_out", task.sample)
    return draw(batch_size, torch.Generator(device=device).manual_seed(seed), device)
