"""Shared pieces of the command-line tests: a generated corpus, a model directory, the command."""

import contextlib
import io
import os
import random
import sys
import warnings

import pytest

from tests.helpers import build_once, shared_folder

# English -> French word by word: learnable in a few steps by transformer_tiny.
LEXICON = {
    "red": "rouge", "blue": "bleu", "green": "vert", "cat": "chat", "dog": "chien",
    "house": "maison", "big": "grand", "small": "petit", "one": "un", "two": "deux",
    "open": "ouvrir", "save": "sauver", "file": "fichier", "close": "fermer",
}

# Small enough to train in seconds: one length bucket (16), a 48-piece vocabulary.
# TensorFlow's graph runtime: XLA's compile of the train and test steps would
# cost each run more than its 120 steps gain (benchmarks/xla_short_run.py);
# test_xla_option.py checks that the default reaches the trainer.
TRAIN_OPTIONS = [
    "--preset", "transformer_tiny", "--batch-size", "16", "--vocabulary-size", "48",
    "--max-length", "16", "--warmup-steps", "40", "--no-xla",
]


def generated_pairs(pairs, seed):
    """`pairs` (English, French) sentence pairs of 1-3 words from `LEXICON`, by `seed`."""
    rng = random.Random(seed)
    words = sorted(LEXICON)
    rows = []
    for _ in range(pairs):
        english = [rng.choice(words) for _ in range(rng.randint(1, 3))]
        rows.append((" ".join(english), " ".join(LEXICON[w] for w in english)))
    return rows


def write_corpus(path, pairs, seed):
    """Write `pairs` generated sentence pairs of 1-3 words as a TSV file; return the pairs."""
    rows = generated_pairs(pairs, seed)
    path.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """`{"train", "valid", "test"}` -> generated TSV paths (as str). Read only."""
    tmp_path = tmp_path_factory.mktemp("corpus")
    paths = {}
    for seed, (split, pairs) in enumerate((("train", 192), ("valid", 32), ("test", 20))):
        write_corpus(tmp_path / f"{split}.tsv", pairs, seed)
        paths[split] = str(tmp_path / f"{split}.tsv")
    return paths


# The one `keras-tf train` run the command tests share (see `trained_run`).
RUN_EPOCHS, RUN_STEPS = 2, 60


def run_argv(corpus, out, *extra):
    """`keras-tf train` argv of the shared run: 2 epochs of 60 steps, --valid, 2 checkpoints kept."""
    return ["train", "--train", corpus["train"], "--valid", corpus["valid"], "--out", str(out),
            "--epochs", str(RUN_EPOCHS), "--steps", str(RUN_STEPS), "--keep-checkpoints", "2",
            *TRAIN_OPTIONS, *extra]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, corpus):
    """`(model directory, what train printed)` of one `keras-tf train` run. Read only.

    Trained once per test run (the pytest-xdist workers share it): the
    reference of the resume test, the model that `evaluate`, `translate`,
    `export` and `average` read.
    """
    from keras_tf.cli.main import main

    def build(folder):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            assert main(run_argv(corpus, folder / "run")) == 0
        (folder / "train.out").write_text(printed.getvalue(), encoding="utf-8")

    folder = build_once(shared_folder(tmp_path_factory, "cli_trained_run"), build)
    return folder / "run", (folder / "train.out").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def untrained_model_dir(tmp_path_factory, corpus):
    """A model directory as `keras-tf train` writes it, holding an untrained transformer_tiny.

    For the commands that read a model directory, when what it has learned
    does not matter: it costs seconds, not a training run.
    """
    from keras_tf.cli.model_dir import MODEL_FILE, TOKENIZERS_DIR
    from keras_tf.models import Seq2SeqTransformer, get_preset
    from keras_tf.text import Seq2SeqTokenizers, read_tsv

    directory = tmp_path_factory.mktemp("untrained")
    train = read_tsv(corpus["train"])
    tokenizers = Seq2SeqTokenizers.train(train.sources, train.targets, vocabulary_size=48)
    tokenizers.save(str(directory / TOKENIZERS_DIR))
    model = Seq2SeqTransformer(
        get_preset(
            "transformer_tiny",
            source_vocabulary_size=tokenizers.source_vocabulary_size,
            target_vocabulary_size=tokenizers.target_vocabulary_size,
            max_source_length=16,
            max_target_length=16,
        )
    )
    model.save(str(directory / MODEL_FILE))
    return str(directory)


def keras_tf_command():
    """The installed `keras-tf` console script, or `python -m keras_tf.cli.main` without one."""
    script = os.path.join(os.path.dirname(sys.executable), "keras-tf")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "keras_tf.cli.main"]
