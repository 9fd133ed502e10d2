"""BLEU-driven training: score the validation set each epoch as `keras-tf evaluate` would.

`ValidationBleu` decodes the validation sources with the cached, XLA-compiled
greedy search of `Seq2SeqTranslator.generate` (in the batches of
`keras-tf evaluate`, `keras_tf.translation.batches`), scores them
with sacreBLEU (`corpus_scores`), and puts `val_bleu` and `val_chrf` in the
epoch logs, before the checkpoint, CSV, TensorBoard and progress-bar
callbacks read them. `keras_tf.training.train(keep_best="bleu")` keeps the
model of the best `val_bleu`; `early_stopping=N` stops after N epochs
without a gain.
"""

import logging

import keras

from keras_tf.decoding.config import DecodingConfig
from keras_tf.translation.batches import translate_in_batches
from keras_tf.translation.translator import Seq2SeqTranslator

logger = logging.getLogger("keras_tf.training")


def corpus_scores(hypotheses, references):
    """sacreBLEU's corpus `(BLEU, CHRFScore)` of `hypotheses` against one reference each.

    The default settings (13a tokenizer for BLEU; chrF with n=6, β=2), as
    `sacrebleu` prints them on the command line.

    Example:
        >>> bleu, chrf = corpus_scores(["le chat est noir"], ["le chat est noir"])
        >>> round(bleu.score, 1), round(chrf.score, 1)
        (100.0, 100.0)
    """
    import sacrebleu

    return (
        sacrebleu.corpus_bleu(hypotheses, [references]),
        sacrebleu.corpus_chrf(hypotheses, [references]),
    )


# `evaluate --metrics`: sacreBLEU's metric classes by name (keras_tf.cli.evaluate
# spells the same tuples, so that its --help imports nothing; a test keeps them equal).
METRICS = ("bleu", "chrf", "ter")
# `evaluate --tokenize`: BLEU's tokenizers that need nothing beyond sacreBLEU
# ("ja-mecab", "ko-mecab" and the "spm" family need extra packages or downloads).
TOKENIZERS = ("13a", "intl", "zh", "char", "none")


def corpus_metrics(hypotheses, references, metrics=("bleu", "chrf"), tokenize="13a"):
    """sacreBLEU's corpus scores with their signatures, as MT papers report them.

    Args:
        hypotheses: list of `str`.
        references: list of `str`, one per hypothesis.
        metrics: names of `METRICS`, in the order to report.
        tokenize: BLEU's tokenizer, one of `TOKENIZERS` ("zh" for Chinese
            targets, "char" for Japanese without MeCab).

    Returns:
        A list of `(score, signature)`: the sacreBLEU score object (its
        `str` is sacreBLEU's line, its `.score` the number) and the
        signature string (`nrefs:1|case:mixed|eff:no|tok:13a|...`).

    Example:
        >>> [(round(s.score, 1), sig.split("|")[3]) for s, sig in corpus_metrics(
        ...     ["le chat est noir"], ["le chat est noir"], ["bleu"], tokenize="intl")]
        [(100.0, 'tok:intl')]
    """
    from sacrebleu.metrics import BLEU, CHRF, TER

    unknown = [name for name in metrics if name not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"metrics must be some of {METRICS}; received {list(metrics)}")
    if tokenize not in TOKENIZERS:
        raise ValueError(f"tokenize must be one of {TOKENIZERS}; received tokenize={tokenize!r}")
    makers = {"bleu": lambda: BLEU(tokenize=tokenize), "chrf": CHRF, "ter": TER}
    results = []
    for name in metrics:
        metric = makers[name]()
        results.append((metric.corpus_score(hypotheses, [references]), str(metric.get_signature())))
    return results


class ValidationBleu(keras.callbacks.Callback):
    """Each epoch, greedy-decode the validation sources; log sacreBLEU BLEU and chrF.

    Adds `val_bleu` and `val_chrf` to the epoch logs, and keeps the last
    hypotheses in `self.hypotheses`. Use it with `Seq2SeqTranslator.fit`
    (the translator's own preprocessor decodes), or with a
    `Seq2SeqTransformer` trained by `keras_tf.training.train` and its
    tokenizers.

    Args:
        sources: list of `str`, the validation source sentences.
        references: list of `str`, one reference translation each.
        tokenizers: the `Seq2SeqTokenizers` of a `Seq2SeqTransformer`.
            Defaults to None: the model is a `Seq2SeqTranslator`.
        batch_size: sentences decoded per call. Defaults to 32, as `keras-tf
            evaluate`'s default, so the same batches are decoded.
        max_length: most target tokens generated. Defaults to `None`: the
            model's `max_target_length`, as `keras-tf evaluate`.

    Example:
        >>> callback = ValidationBleu(["a cat"], ["un chat"])
        >>> callback.batch_size
        32
    """

    def __init__(self, sources, references, tokenizers=None, *, batch_size=32, max_length=None):
        super().__init__()
        if len(sources) != len(references):
            raise ValueError(
                "ValidationBleu needs one reference per source; received "
                f"{len(sources)} sources and {len(references)} references"
            )
        self.sources = list(sources)
        self.references = list(references)
        self.tokenizers = tokenizers
        self.batch_size = batch_size
        self.max_length = max_length
        self.hypotheses = None
        self._translator = None

    def translator(self, model=None):
        """The `Seq2SeqTranslator` of `model` (default: the callback's) and `tokenizers`."""
        model = self.model if model is None else model
        if isinstance(model, Seq2SeqTranslator):
            return model
        if self._translator is None or self._translator.backbone is not model:
            if self.tokenizers is None:
                raise TypeError(
                    "ValidationBleu decodes with a Seq2SeqTranslator's preprocessor; this "
                    f"model is a {type(model).__name__}: pass its tokenizers"
                )
            # TensorFlow: the tokenizers exist, so it is imported already.
            from keras_tf.text.preprocessor import Seq2SeqPreprocessor

            config = model.config
            preprocessor = Seq2SeqPreprocessor(
                self.tokenizers, config.max_source_length, config.max_target_length
            )
            self._translator = Seq2SeqTranslator(model, preprocessor)
        return self._translator

    def score(self, model=None):
        """`(bleu, chrf)` of `model` (default: the callback's): greedy, as after each epoch."""
        decoding = DecodingConfig(method="greedy", max_length=self.max_length)
        self.hypotheses = translate_in_batches(
            self.translator(model), self.sources, self.batch_size, decoding
        )
        return corpus_scores(self.hypotheses, self.references)

    def on_epoch_end(self, epoch, logs=None):
        bleu, chrf = self.score()
        if logs is not None:
            logs["val_bleu"] = float(bleu.score)
            logs["val_chrf"] = float(chrf.score)
