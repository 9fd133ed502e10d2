"""The default schedule follows the planned number of steps; the rate reaches the logs."""

import logging
import math

import numpy as np
import pytest

from keras_tf.training import (
    WarmupInverseSqrtSchedule,
    make_reverse_task,
    planned_schedule,
    planned_warmup_steps,
    train,
)
from keras_tf.models.schedules import paper_peak_learning_rate
from tests.helpers import one_block_tiny


@pytest.mark.parametrize("total_steps", [10, 300, 3_000, 30_000])
def test_warmup_scales_with_the_planned_steps(total_steps):
    schedule = planned_schedule(d_model=128, total_steps=total_steps)
    assert schedule.warmup_steps == min(4000, max(1, round(total_steps / 10)))
    peak = paper_peak_learning_rate(128)
    # The peak is reached inside the run, at the end of the warm-up, and not exceeded.
    rates = np.asarray(schedule(np.arange(total_steps)))  # the schedule is elementwise
    assert math.isclose(float(rates.max()), peak, rel_tol=1e-5)
    assert math.isclose(float(rates[schedule.warmup_steps - 1]), peak, rel_tol=1e-5)
    # Then the inverse square root: at 4x the warm-up, half the peak.
    assert math.isclose(float(schedule(4 * schedule.warmup_steps - 1)), peak / 2, rel_tol=1e-5)


def test_a_long_run_gets_the_papers_schedule():
    from keras_tf.training import TransformerSchedule

    ours, papers = planned_schedule(512, 100_000), TransformerSchedule(512, 4000)
    for step in (0, 999, 3999, 20_000, 99_999):
        assert math.isclose(float(ours(step)), float(papers(step)), rel_tol=1e-5)
    assert planned_warmup_steps(10**6) == 4000
    with pytest.raises(ValueError, match="received peak_learning_rate=0, warmup_steps=5"):
        WarmupInverseSqrtSchedule(0, 5)


# train() plans the warm-up and logs the rate: tests/training/test_keep_best.py.


def test_a_run_that_ends_inside_its_warmup_warns(tmp_path, caplog):
    data = make_reverse_task(64, seed=1)
    with caplog.at_level(logging.WARNING, logger="keras_tf"):
        train(one_block_tiny(), data, out_dir=str(tmp_path), epochs=1, batch_size=32,
              warmup_steps=100, jit_compile=False, verbose=0)
    warnings = [r.getMessage() for r in caplog.records if "warm-up" in r.getMessage()]
    assert len(warnings) == 1 and "after 2 steps" in warnings[0] and "of 100 steps" in warnings[0]
    assert "\n" not in warnings[0]
