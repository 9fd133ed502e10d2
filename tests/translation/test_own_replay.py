"""`fit(..., options=TrainingOptions(replay_source=FILE))`: the translator replays its own translations."""

import pytest

from keras_tf.decoding import DecodingConfig
from keras_tf.option_error import OptionError
from keras_tf.text import Seq2SeqPreprocessor
from keras_tf.translation import Seq2SeqTranslator, TrainingOptions
from tests.serving.conftest import MAX_SOURCE_LENGTH, random_model, sentences, train_tokenizers


@pytest.fixture(scope="module")
def translator():
    tokenizers = train_tokenizers("sentencepiece")
    preprocessor = Seq2SeqPreprocessor(tokenizers, MAX_SOURCE_LENGTH, MAX_SOURCE_LENGTH)
    return Seq2SeqTranslator(random_model(tokenizers, 3), preprocessor, DecodingConfig(max_length=8))


def test_fit_mixes_in_its_translations_of_the_replay_source_at_the_ratio(translator, tmp_path):
    lines = sentences(12, seed=1)
    source = tmp_path / "general.txt"
    source.write_text("\n".join(lines) + "\n\n", encoding="utf-8")  # a blank line is skipped
    sources = sentences(8, seed=2)
    targets = [" ".join(reversed(s.split())) for s in sources]
    options = TrainingOptions(replay_source=str(source), replay_ratio=0.5, epochs=1, batch_size=4)
    mixed_sources, mixed_targets = translator.with_own_replay(sources, targets, options)
    # The given pairs, then 4 (0.5 per pair) of the 12 made, each its own translation.
    assert mixed_sources[:8] == sources and mixed_targets[:8] == targets
    assert len(mixed_sources) == 12
    made = dict(zip(lines, translator.generate(lines)))
    assert all(made[s] == t for s, t in zip(mixed_sources[8:], mixed_targets[8:]))
    assert len(set(mixed_sources[8:])) == 4
    history = translator.fit(sources, targets, options=options, verbose=0)
    assert history.epoch == [0]
    with pytest.raises(OptionError, match="replay_source=.*: no such file|No such file"):
        translator.with_own_replay(sources, targets, options.replace(
            replay_source=str(tmp_path / "missing.txt")))
