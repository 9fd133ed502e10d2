"""Fine-tuning: `train(initial_model=...)` starts from the given weights.

That it lowers the loss on a new corpus is checked through the command line,
`tests/cli/test_average_and_init_from.py`.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_tf.models.losses import never_emitted_ids
from keras_tf.training import MaskedSparseCategoricalCrossentropy, make_reverse_task, train
from tests.helpers import shared_reverse_model

FAST = dict(batch_size=32, jit_compile=False, verbose=0)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """transformer_tiny trained on the reverse task (sources of 4-10 tokens)."""
    return shared_reverse_model(tmp_path_factory)


def _evaluation_loss(model, data):
    # The training loss, label smoothing included (none of it on the ids the
    # model never emits), without updates or dropout (transformer_tiny has dropout 0).
    inputs, labels = data
    model.compile(loss=MaskedSparseCategoricalCrossentropy(
        label_smoothing=0.1, excluded_ids=never_emitted_ids(model)), jit_compile=False)
    return model.evaluate(
        tf.data.Dataset.from_tensor_slices((dict(inputs), labels)).batch(32), verbose=0,
        return_dict=True)["loss"]


def test_step_zero_loss_is_the_models_evaluation_loss(pretrained, tmp_path):
    # A new corpus of sequences of one length (8, inside the pre-training range).
    # The epoch's loss is a mean over its tokens, so the shuffle moves nothing.
    new = make_reverse_task(128, min_length=8, max_length=8, seed=5)
    expected = _evaluation_loss(pretrained, new)
    # A learning rate of 0: the weights stay the given ones through the epoch, so
    # every step's loss is the step-0 loss, and their mean the evaluation loss.
    model, history = train(pretrained.config, new, out_dir=str(tmp_path), epochs=1,
                           learning_rate=0.0, initial_model=pretrained, **FAST)
    for a, b in zip(model.get_weights(), pretrained.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert history.history["loss"][0] == pytest.approx(expected, rel=1e-5)
    # And fresh weights start far above it.
    fresh, fresh_history = train(pretrained.config, new, out_dir=str(tmp_path / "fresh"),
                                 epochs=1, learning_rate=0.0, **FAST)
    assert fresh_history.history["loss"][0] > expected + 0.5


def _exact_match(model, data):
    from keras_tf.decoding import generate

    inputs, labels = data
    tokens = generate(model, inputs["encoder_tokens"], max_length=labels.shape[1]).tokens
    return float((tokens == labels).all(axis=1).mean())


def test_the_default_fine_tuning_recipe_learns_new_data_and_a_low_peak_keeps_more_old(
        pretrained, tmp_path):
    """Longer sequences than it was trained on: the default (the paper's peak) learns them.

    Measured (the reverse model, 6 epochs of 768 pairs of 11-12 tokens): the
    paper's peak rose from 0.02 to 0.85 exact matches on the new
    lengths and kept 0.44 of 0.99 on the old; a tenth of it reached 0.23 and
    kept 0.77. The trade-off is the issue #58 benchmark's: with nothing of
    the old domain, the default learns, and replay keeps.
    """
    from keras_tf.models.learning_rates import paper_peak_learning_rate
    from keras_tf.training import fine_tuning_peak_learning_rate

    old = make_reverse_task(200, min_length=4, max_length=10, seed=11)
    new_train = make_reverse_task(768, min_length=11, max_length=12, seed=12)
    new_test = make_reverse_task(100, min_length=11, max_length=12, seed=13)
    before_new = _exact_match(pretrained, new_test)
    d_model = pretrained.config.d_model
    model, history = train(pretrained.config, new_train, out_dir=str(tmp_path / "defaults"),
                           epochs=6, initial_model=pretrained, **FAST)
    # The planned rate never passes the fine-tuning peak, the paper's.
    assert fine_tuning_peak_learning_rate(d_model) == paper_peak_learning_rate(d_model)
    rates = history.history["learning_rate"]
    assert 0 < max(rates) <= fine_tuning_peak_learning_rate(d_model) * (1 + 1e-6), rates
    after_new = _exact_match(model, new_test)
    assert after_new > before_new + 0.3, (before_new, after_new)
    # A tenth of the peak learns less of the new lengths and keeps more of the old.
    low, _ = train(pretrained.config, new_train, out_dir=str(tmp_path / "low"), epochs=6,
                   initial_model=pretrained,
                   peak_learning_rate=paper_peak_learning_rate(d_model) / 10, **FAST)
    assert _exact_match(low, new_test) < after_new
    assert _exact_match(low, old) > _exact_match(model, old)
