"""`TrainingOptions`: options.json holds it, a resume compares it, a bad field is one line."""

import json
import os

import keras
import pytest

import keras_tf.training.trainer
from keras_tf.models import Seq2SeqTransformer
from keras_tf.option_error import OptionError
from keras_tf.preset_checks import PresetError
from keras_tf.text import ParallelCorpus
from keras_tf.training import TrainingOptions, train_preset_dir
from keras_tf.translation import presets
from tests.cli.conftest import generated_pairs


def test_options_json_round_trip(tmp_path):
    options = TrainingOptions(
        preset="transformer_tiny", dropout=0.1, tokenizer="wordpiece", vocabulary_size=48,
        max_length=16, tokenizer_model=("source.model", "target.model"), lora_rank=4,
        lora_targets=["query", "key"], mixed_precision="mixed_bfloat16", batch_tokens=256,
        epochs=3, steps=7, learning_rate=1e-3, warmup_steps=5, gradient_accumulation_steps=2,
        label_smoothing=0.2, seed=4, keep_best="loss", early_stopping=2, keep_checkpoints=3,
        max_minutes=45,
    )
    presets.write_options(tmp_path, options, train_pairs=10, valid_pairs=0)
    stored = json.loads((tmp_path / presets.OPTIONS_FILE).read_text())
    assert stored["train_pairs"] == 10 and stored["lora_targets"] == ["query", "key"]
    assert stored["tokenizer_model"] == [str(tmp_path.cwd() / "source.model"),
                                         str(tmp_path.cwd() / "target.model")]
    assert presets.read_options(tmp_path) == options
    assert presets.read_options(tmp_path / "missing") is None


def test_an_options_json_from_before_a_field_existed_reads_its_default(tmp_path):
    (tmp_path / "options.json").write_text(json.dumps(
        {"preset": "transformer_tiny", "vocabulary_size": 48, "lora_targets": None}))
    options = presets.read_options(tmp_path)
    assert options == TrainingOptions(preset="transformer_tiny", vocabulary_size=48)
    assert options.gradient_accumulation_steps == 1 and options.label_smoothing == 0.1
    # Fine-tuning runs once wrote their start into `preset`.
    (tmp_path / "options.json").write_text(json.dumps(
        {"preset": "init-from runs/en-de", "tokenizer": "sentencepiece_vocabulary",
         "vocabulary_size": 100, "max_length": 511}))
    assert presets.read_options(tmp_path) == TrainingOptions(init_from="runs/en-de")
    (tmp_path / "options.json").write_text(json.dumps({"epochs": 2, "epoch": 3}))
    with pytest.raises(PresetError, match=r"options.json: Unknown TrainingOptions fields \['epoch'\]"):
        presets.read_options(tmp_path)


@pytest.mark.parametrize("fields, message", [
    (dict(dropout=1.5), "dropout=1.5: must be in [0, 1)"),
    (dict(epochs=0), "epochs=0: must be a whole number in [1, 2147483647]"),
    (dict(batch_size=8.0), "batch_size=8.0: must be a whole number in [1, 2147483647]"),
    (dict(epochs=10**20), "epochs=100000000000000000000: must be a whole number in "
     "[1, 2147483647]"),
    (dict(seed=10**20), "seed=100000000000000000000: must be a whole number in [0, 4294967295]"),
    (dict(dropout=float("nan")), "dropout=nan: must be in [0, 1)"),
    (dict(learning_rate=float("inf")), "learning_rate=inf: must be a number in (0, 1.0] (Adam "
     "diverges above)"),
    (dict(learning_rate=float("nan")), "learning_rate=nan: must be a number in (0, 1.0] (Adam "
     "diverges above)"),
    (dict(replay_ratio=float("inf")), "replay_ratio=inf: must be a number in (0, 1000.0]"),
    (dict(preset="transformer_tiny", lora_rank=100000),
     "lora_rank=100000: must be at most the model's d_model, 32 (transformer_tiny)"),
    (dict(preset="transformer_huge"),
     "preset='transformer_huge': not an untrained architecture; one of ['transformer_base', "
     "'transformer_big', 'transformer_small', 'transformer_tiny']"),
    (dict(tokenizer="bpe"), "tokenizer='bpe': must be one of ['sentencepiece', 'wordpiece']"),
    (dict(mixed_precision="float16"),
     "mixed_precision='float16': must be None or one of ['mixed_bfloat16', 'mixed_float16']"),
    (dict(label_smoothing=1.0), "label_smoothing=1.0: must be in [0, 1)"),
    (dict(learning_rate=0), "learning_rate=0: must be a number in (0, 1.0] (Adam diverges above)"),
    (dict(keep_best="accuracy"), "keep_best='accuracy': must be None or one of ['bleu', 'loss']"),
    (dict(batch_size=8, batch_tokens=512), "batch_size=8 and batch_tokens=512: give one of them"),
    (dict(max_minutes=0), "max_minutes=0: must be a number in (0, 1e+06]"),
    (dict(max_minutes=-1.5), "max_minutes=-1.5: must be a number in (0, 1e+06]"),
    (dict(max_minutes=float("inf")), "max_minutes=inf: must be a number in (0, 1e+06]"),
    (dict(max_minutes=float("nan")), "max_minutes=nan: must be a number in (0, 1e+06]"),
    (dict(max_minutes="45"), "max_minutes='45': must be a number in (0, 1e+06]"),
    (dict(max_minutes=True), "max_minutes=True: must be a number in (0, 1e+06]"),
    (dict(max_minutes=1e20), "max_minutes=1e+20: must be a number in (0, 1e+06]"),
    (dict(init_from="run1", tokenizer_model="/spm.model"),
     "init_from='run1' and tokenizer_model='/spm.model': fine-tuning keeps the model's own "
     "tokenizers; give one of them"),
])
def test_a_bad_field_is_one_line_naming_it(fields, message):
    with pytest.raises(OptionError) as caught:
        TrainingOptions(**fields)
    assert str(caught.value) == message


def test_fine_tuning_options_leave_the_model_fields_to_the_model():
    options = TrainingOptions(preset="transformer_tiny", vocabulary_size=48, init_from="run1")
    assert (options.preset, options.tokenizer, options.vocabulary_size, options.max_length) == (
        None, None, None, None)
    with pytest.raises(OptionError, match="^preset=None: not an untrained architecture"):
        TrainingOptions(preset=None)


class _Trainer:
    """Stands in for `keras_tf.training.trainer.train`: records its arguments, trains nothing."""

    def __init__(self):
        self.calls = []

    def __call__(self, config, train_set, valid_set, **kwargs):
        self.calls.append(kwargs)
        history = keras.callbacks.History()
        history.epoch = []
        return Seq2SeqTransformer(config), history


@pytest.fixture
def corpus():
    pairs = generated_pairs(64, seed=0)
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs])


FIRST = dict(preset="transformer_tiny", vocabulary_size=48, max_length=16, batch_size=16,
             epochs=1)


def test_a_resume_repeats_the_fixed_options(corpus, tmp_path, monkeypatch):
    trainer = _Trainer()
    monkeypatch.setattr(keras_tf.training.trainer, "train", trainer)
    out = str(tmp_path / "run")
    train_preset_dir(out, corpus, jit_compile=False, **FIRST)  # keyword options, as before
    first = presets.read_options(out)
    assert first == TrainingOptions(**FIRST)
    # The same recipe as an object, with more epochs, another smoothing and a time
    # budget: they fix nothing.
    again = TrainingOptions(**FIRST).replace(epochs=2, label_smoothing=0.2, max_minutes=30)
    train_preset_dir(out, corpus, options=again, jit_compile=False)
    assert presets.read_options(out) == again
    assert [call["epochs"] for call in trainer.calls] == [1, 2]
    assert [call["label_smoothing"] for call in trainer.calls] == [0.1, 0.2]
    assert [call["max_minutes"] for call in trainer.calls] == [None, 30]
    # Another dropout changes the model: refused, naming it, before any training.
    with pytest.raises(OptionError) as caught:
        train_preset_dir(out, corpus, options=again.replace(dropout=0.1), jit_compile=False)
    assert str(caught.value) == (
        f"dropout=0.1: {out} holds a run made with other options (dropout None before, 0.1 "
        "now); repeat them to resume, or train into a new directory"
    )
    assert len(trainer.calls) == 2 and presets.read_options(out) == again
    with pytest.raises(TypeError, match="not both; received options and \\['seed'\\]"):
        train_preset_dir(out, corpus, options=again, seed=1)


def test_lora_targets_count_only_with_lora():
    plain = TrainingOptions()
    plain.check_resumes(plain.replace(lora_targets=("query",)), "run1")  # no adapters: alike
    # The default: every attention and feed-forward projection.
    with pytest.raises(OptionError, match="lora-targets \\['query'\\] before, \\['query', 'key', "
                       "'value', 'attention_output', 'inner_dense', 'output_dense'\\] now"):
        plain.replace(lora_rank=4).check_resumes(
            plain.replace(lora_rank=4, lora_targets=("query",)), "run1")


def test_adaptation_options_are_checked_and_round_trip(tmp_path):
    options = TrainingOptions(init_from="start", replay_source="general.en",
                              general_valid="dev.tsv", keep=0.8, merge_alpha=0.5)
    assert options.replay_source == os.path.abspath("general.en")
    assert TrainingOptions.from_dict({**options.to_dict(), "merge": {"alpha": 0.5}}) == options
    assert TrainingOptions(keep=None).keep == 0.9
    for fields, message in (
        (dict(init_from="start", keep=0), r"keep=0: must be in \(0, 1\]"),
        (dict(init_from="start", keep=1.5), r"keep=1.5: must be in \(0, 1\]"),
        (dict(init_from="start", merge_alpha=float("nan")), r"merge_alpha=nan: must be in \[0, 1\]"),
        (dict(general_valid="dev.tsv"), "general_valid=.*: adapts a trained model"),
        (dict(merge_alpha=0.5), "merge_alpha=0.5: adapts a trained model"),
    ):
        with pytest.raises(OptionError, match=message):
            TrainingOptions(**fields)
