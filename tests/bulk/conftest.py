"""The serving tests' small exports, reused: the same model with and without XLA, built once per run."""

import pytest

from tests.serving.conftest import Exported

# Lines of the corpus the tiny model's tokenizers were trained on (tests/serving/conftest.py).
WORDS = "open save close file tab notebook kernel cell run stop copy paste".split()
OVERLONG = " ".join(WORDS * 4)  # 48 words: more pieces than max_source_length 32 allows


@pytest.fixture(scope="session")
def greedy_export(tmp_path_factory):
    """SentencePiece, greedy, no XLA: the default export (the serving tests' own)."""
    return Exported(tmp_path_factory, "greedy", "sentencepiece", seed=3)


@pytest.fixture(scope="session")
def xla_export(tmp_path_factory):
    """The same model, its generation compiled with XLA."""
    return Exported(tmp_path_factory, "xla", "sentencepiece", seed=3, xla=True)


def input_files(folder):
    """Three inputs: empty lines, non-ASCII, a byte that is not UTF-8, an overlong line, CRLF; an empty file.

    Returns `{name: [line bytes]}` as a line reader splits them.
    """
    folder.mkdir(parents=True, exist_ok=True)
    contents = {
        "a.txt": b"open save file\n\ncaf\xc3\xa9 cr\xc3\xa8me \xc3\xbcber stra\xc3\x9fe\n"
                 b"run the cell \xff now\n" + OVERLONG.encode() + b"\nclose tab\r\n  \n",
        "b.txt": b"\n\nrun stop copy\nfichier onglet noyau",  # no final line end
        "c.txt": b"",
    }
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return {
        "a.txt": [b"open save file", b"", "café crème über straße".encode(), b"run the cell \xff now",
                  OVERLONG.encode(), b"close tab", b"  "],
        "b.txt": [b"", b"", b"run stop copy", b"fichier onglet noyau"],
        "c.txt": [],
    }
