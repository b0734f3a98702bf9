"""reproduce/calibration.py: the jobs timed as reproduce's pool runs them (the rest of the
calibration, with a stand-in for the timing, is tests/jobs/test_plan.py's)."""

from sinkexp.config.compose import compose_config
from sinkexp.jobs.cost import training_flops
from sinkexp.reproduce.calibration import in_pool


def test_the_pool_times_each_job_in_a_fresh_process_and_returns_the_timings_in_order():
    """Two jobs timed two at a time, the larger first (in_pool): each gets its own (step, evaluation)
    seconds, in the order given; the second job does about 3,600x the first's arithmetic a step."""
    small = compose_config("task=trigger", "model.d_model=16", "train.batch_size=8")
    large = compose_config("task=trigger", "model.d_model=256", "model.n_layers=4", "train.batch_size=64")
    assert training_flops(large) > 1000 * training_flops(small)
    timed = in_pool([small, large], workers=2)
    assert len(timed) == 2 and all(seconds > 0 for pair in timed for seconds in pair)
    assert timed[1][0] > timed[0][0]
