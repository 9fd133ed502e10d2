"""The text pipeline: corpus readers, subword tokenizers and the tf.data input.

Read a corpus, learn tokenizers from it, build batches for `model.fit`:

    from keras_tf import text
    corpus = text.read_tsv("train.tsv")
    tokenizers = text.Seq2SeqTokenizers.train(corpus.sources, corpus.targets,
                                              vocabulary_size=8000)
    dataset = text.make_dataset(corpus, tokenizers, batch_size=64,
                                max_source_length=64, max_target_length=64)
"""

from keras_tf.tensorflow_import import require_tensorflow

require_tensorflow("keras_tf.text (tokenizers and the tf.data pipeline)")

from keras_tf.text.corpora import (
    SKIP_REASONS,
    CorpusError,
    ParallelCorpus,
    ReadStats,
    read_aligned,
    read_dataset,
    read_tsv,
    with_replay,
)
from keras_tf.text.pipeline import (
    OverlongStats,
    default_bucket_boundaries,
    encode_source,
    fitted_batch_tokens,
    frame_source,
    frame_target,
    make_dataset,
    make_dataset_by_epoch,
    overlong_stats,
    padding_fraction,
)
from keras_tf.text.preprocessor import Seq2SeqPreprocessor, clean_text
from keras_tf.text.tokenizers import (
    Seq2SeqTokenizers,
    SentencePieceVocabularyTokenizer,
    auto_vocabulary_size,
    train_sentencepiece,
    train_wordpiece,
)

__all__ = [
    "SKIP_REASONS",
    "CorpusError",
    "OverlongStats",
    "ParallelCorpus",
    "ReadStats",
    "Seq2SeqPreprocessor",
    "Seq2SeqTokenizers",
    "SentencePieceVocabularyTokenizer",
    "auto_vocabulary_size",
    "clean_text",
    "default_bucket_boundaries",
    "encode_source",
    "fitted_batch_tokens",
    "frame_source",
    "frame_target",
    "make_dataset",
    "make_dataset_by_epoch",
    "overlong_stats",
    "padding_fraction",
    "read_aligned",
    "read_dataset",
    "read_tsv",
    "train_sentencepiece",
    "train_wordpiece",
    "with_replay",
]
