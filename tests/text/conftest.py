"""Small multilingual corpora and tokenizers trained on them, shared by the text tests."""

import pytest

from keras_tf.text import ParallelCorpus, Seq2SeqTokenizers

# One sentence per script the tokenizers must round-trip.
MULTILINGUAL = [
    "Café crème à la française",  # accented Latin
    "Grüße aus München, straße!",  # German
    "我们喜欢机器翻译。",  # Chinese
    "I love it 😀🎉",  # emoji
    "مرحبا بالعالم",  # Arabic, right to left
    "שלום עולם",  # Hebrew, right to left
]
ENGLISH = ["the file is open", "save the notebook", "open a new terminal", "close the tab"]
FRENCH = [
    "le fichier est ouvert",
    "enregistrer le notebook",
    "ouvrir un terminal",
    "fermer l'onglet",
]


def training_corpus():
    # Each sentence is repeated so that SentencePiece's character coverage keeps
    # every character (rare ones would become UNK).
    sources = (MULTILINGUAL + ENGLISH) * 10
    targets = (list(reversed(MULTILINGUAL)) + FRENCH) * 10
    return ParallelCorpus(sources, targets)


# The largest sizes this corpus allows SentencePiece; WordPiece keeps fewer.
VOCABULARY_SIZE = {"sentencepiece": 90, "wordpiece": 300}


@pytest.fixture(scope="session", params=["sentencepiece", "wordpiece"])
def tokenizers(request):
    corpus = training_corpus()
    return Seq2SeqTokenizers.train(
        corpus.sources,
        corpus.targets,
        kind=request.param,
        vocabulary_size=VOCABULARY_SIZE[request.param],
    )
