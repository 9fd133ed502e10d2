"""`keras-tf train` without --batch-size or --batch-tokens batches by the fitted budget."""

import re
import types

import numpy as np

from keras_tf.cli.main import main
from keras_tf.models import Seq2SeqTransformer
from keras_tf.text.pipeline import DEFAULT_BATCH_TOKENS

WORDS = ["file", "open", "save", "cell", "run", "kernel", "the", "new", "tab", "notebook"]


def test_train_batches_by_the_fitted_budget_by_default(tmp_path, monkeypatch, capsys):
    # 3,000 pairs of 1 to 11 words: small enough that the budget falls below the
    # default's cap and the 512 tokens above which the peak grows.
    rng = np.random.default_rng(0)
    sources = [" ".join(rng.choice(WORDS, rng.integers(1, 12))) for _ in range(3000)]
    corpus = tmp_path / "train.tsv"
    corpus.write_text("".join(f"{s}\t{' '.join(s.split()[::-1])}\n" for s in sources))
    seen = {}

    def train(config, train_set, valid_set, **options):  # what train_preset_dir hands to fit
        seen.update(train_set=train_set, config=config, peak=options["peak_learning_rate"])
        return Seq2SeqTransformer(config), types.SimpleNamespace(epoch=[])

    monkeypatch.setattr("keras_tf.training.trainer.train", train)
    assert main(["train", "--train", str(corpus), "--out", str(tmp_path / "run"),
                 "--preset", "transformer_tiny", "--max-length", "16", "--epochs", "1"]) == 0
    budget = int(re.search(r"Batches of at most (\d+) tokens", capsys.readouterr().err)[1])

    batches = list(seen["train_set"](0).as_numpy_iterator())
    shapes = [(inputs["encoder_tokens"].shape, inputs["decoder_tokens"].shape)
              for inputs, _ in batches]
    assert all(max(s[1], t[1]) * s[0] <= budget for s, t in shapes), (budget, set(shapes))
    # An epoch's padded positions over 200 batches; every pair comes once.
    padded = sum(s[0] * max(s[1], t[1]) for s, t in shapes)
    assert 16 < budget == padded // 200 < 512 < DEFAULT_BATCH_TOKENS, (budget, padded)
    assert len(batches) >= 200 and sum(s[0] for s, _ in shapes) == 3000
    # Below 512 tokens an update, train's own plan: the paper's peak.
    assert seen["peak"] is None
