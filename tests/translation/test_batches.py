"""`translate_in_batches`: input order kept, a padded remainder, and a progress report that suits where stderr goes."""

import io

import numpy as np

from keras_tf.translation import Translations
from keras_tf.translation.batches import n_best_in_batches, translate_in_batches
from tests.serving.conftest import sentences

TEXTS = ["a b c", "a", "a b", "", "a b c d"]


class Upper:
    """A translator stand-in: each text upper-cased, the batches it was sent kept."""

    def __init__(self):
        self.batches = []

    def generate_with_scores(self, texts, decoding=None, seed=None):
        self.batches.append(list(texts))
        return Translations([text.upper() for text in texts], np.zeros([len(texts)], "float32"))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_results_come_back_in_input_order():
    translator = Upper()
    assert translate_in_batches(translator, TEXTS, 2) == [text.upper() for text in TEXTS]
    # The short last batch went out as 2 rows (one compiled shape), its copy dropped.
    assert [len(batch) for batch in translator.batches] == [2, 2, 2]


def test_the_remainder_repeats_its_longest_text_only_after_a_full_batch():
    translator = Upper()
    assert translate_in_batches(translator, TEXTS, 3) == [text.upper() for text in TEXTS]
    assert translator.batches == [["", "a", "a b"], ["a b c", "a b c d", "a b c d"]]
    translator.batches = []
    translate_in_batches(translator, TEXTS, 3, pad_remainder=False)
    assert translator.batches == [["", "a", "a b"], ["a b c", "a b c d"]]
    translator.batches = []  # one batch: nothing compiled to share, nothing padded
    translate_in_batches(translator, TEXTS[:2], 3)
    assert translator.batches == [["a", "a b c"]]
    translator.batches = []  # a later chunk of a stream (keras-tf translate)
    translate_in_batches(translator, TEXTS[:2], 3, pad_remainder=True)
    assert translator.batches == [["a", "a b c", "a b c"]]


def test_a_padded_remainder_translates_as_sent_alone(greedy_export, beam_export):
    # 11 sentences, 4 a batch: the last 3 go out as 4 rows, or as 3 (one more program).
    texts = sentences(11, seed=9)
    greedy = greedy_export.translator
    assert translate_in_batches(greedy, texts, 4) == translate_in_batches(
        greedy, texts, 4, pad_remainder=False
    )
    padded, alone = (
        n_best_in_batches(beam_export.translator, texts, 4, 2, pad_remainder=pad)
        for pad in (True, False)
    )
    assert [[text for text, _ in row] for row in padded] == [[text for text, _ in row] for row in alone]
    np.testing.assert_allclose(
        [[score for _, score in row] for row in padded],
        [[score for _, score in row] for row in alone], rtol=0, atol=1e-5,
    )


def test_a_log_file_gets_one_plain_line_and_no_escape_codes(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    translate_in_batches(Upper(), TEXTS, 2, progress=True)
    assert log.getvalue() == "Translated 5 sentences in 3 batches\n"
    log.truncate(0), log.seek(0)
    translate_in_batches(Upper(), TEXTS[:2], 4, progress=True)
    assert log.getvalue() == "Translated 2 sentences in 1 batch\n"


def test_a_terminal_gets_the_progress_bar(monkeypatch, capsys):
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    translate_in_batches(Upper(), TEXTS, 2, progress=True)
    assert "3/3" in terminal.getvalue() and "batch" in terminal.getvalue()
    assert capsys.readouterr().out == ""  # stdout is kept for the results


def test_no_progress_writes_nothing(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    translate_in_batches(Upper(), TEXTS, 2)
    assert log.getvalue() == ""
