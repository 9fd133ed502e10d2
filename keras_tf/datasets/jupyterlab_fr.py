"""English->French UI strings from the JupyterLab French language pack.

The PyPI package `jupyterlab-language-pack-fr-fr` (BSD-3-Clause) ships gettext
`.mo` catalogs of human translations of JupyterLab and its extensions, about
3,500 entries in all. `load_jupyterlab_fr` reads them with the standard
library's `gettext` and keeps about 3,000 distinct pairs:

* the catalog header (the empty msgid) is skipped;
* message contexts (`"context\\x04msgid"`) are stripped;
* a plural entry gives one pair, its singular form (`msgstr[0]`); the other
  plural forms are skipped, since gettext keeps no English plural for them;
* entries translated to nothing are skipped as "untranslated", those whose
  translation equals the English as "identical" (placeholders such as
  `"%1 [%2]"`, product names);
* runs of whitespace, line breaks included, become one space, so every pair
  fits a TSV line;
* repeated pairs are kept once.

Every skipped entry is counted in `JupyterLabFr.stats`. The split is
deterministic: a hash of the English text picks it, so an English string
(and all its translations) lands in exactly one of train, valid and test.
"""

import collections
import dataclasses
import gettext
import importlib.resources
import logging

from keras_tf.datasets.splits import SPLITS, SplitCorpusMethods, check_fractions, split_of
from keras_tf.text.corpora import ParallelCorpus, ReadStats

logger = logging.getLogger("keras_tf.datasets")

PACKAGE = "jupyterlab_language_pack_fr_FR"
PIP_NAME = "jupyterlab-language-pack-fr-fr"
# Reasons a catalog entry gives no pair, in report order.
SKIP_REASONS = ("header", "plural_form", "untranslated", "identical", "duplicate")


@dataclasses.dataclass
class CatalogStats:
    """What the loader read from the catalogs.

    Args:
        catalogs: `.mo` files read.
        entries: catalog entries seen.
        pairs: distinct pairs kept.
        skipped: a `collections.Counter` of entries skipped per reason in
            `SKIP_REASONS`.
        contexts_stripped: kept entries whose message context was removed.
        whitespace_collapsed: kept entries whose whitespace was collapsed.
    """

    catalogs: int = 0
    entries: int = 0
    pairs: int = 0
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    contexts_stripped: int = 0
    whitespace_collapsed: int = 0

    def __str__(self):
        reasons = ", ".join(f"{r}={self.skipped[r]}" for r in SKIP_REASONS if self.skipped[r])
        return (
            f"{PIP_NAME}: {self.catalogs} catalogs, {self.entries} entries, "
            f"{self.pairs} pairs kept, {sum(self.skipped.values())} skipped ({reasons})"
        )


@dataclasses.dataclass
class JupyterLabFr(SplitCorpusMethods):
    """The demo corpus, split three ways.

    Args:
        train: the training `ParallelCorpus`.
        valid: the validation `ParallelCorpus`.
        test: the test `ParallelCorpus`.
        stats: the `CatalogStats` of the catalogs read.
    """

    train: ParallelCorpus
    valid: ParallelCorpus
    test: ParallelCorpus
    stats: CatalogStats


def _catalog_paths():
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise ImportError(
            f"The demo corpus needs the JupyterLab French language pack ({PIP_NAME}); "
            f"install the demo extra: pip install -e '.[demo]' (or pip install {PIP_NAME})"
        ) from None
    messages = root / "locale" / "fr_FR" / "LC_MESSAGES"
    paths = sorted(
        (entry for entry in messages.iterdir() if entry.name.endswith(".mo")),
        key=lambda entry: entry.name,
    )
    if not paths:
        raise FileNotFoundError(
            f"No .mo catalogs under {messages}; reinstall {PIP_NAME}"
        )
    return paths


def load_jupyterlab_fr(*, valid_fraction=0.1, test_fraction=0.1):
    """Load the English->French pairs of the JupyterLab French language pack.

    Args:
        valid_fraction: float, the share of English strings for validation.
            Defaults to 0.1.
        test_fraction: float, the share of English strings for testing.
            Defaults to 0.1.

    Returns:
        A `JupyterLabFr` with `train`, `valid` and `test` `ParallelCorpus`
        splits (sorted by English text) and the `CatalogStats`.

    Raises:
        ImportError: naming the `.[demo]` extra, if the package is missing.

    Example:
        >>> corpus = load_jupyterlab_fr()
        >>> len(corpus.train) > 2000
        True
        >>> train = corpus.as_datasets()["train"]  # (english, french) strings
    """
    check_fractions(valid_fraction, test_fraction)
    stats = CatalogStats()
    seen = set()
    pairs = {name: [] for name in SPLITS}
    for path in _catalog_paths():
        with path.open("rb") as file:
            catalog = gettext.GNUTranslations(file)._catalog
        stats.catalogs += 1
        for key, translation in catalog.items():
            stats.entries += 1
            if isinstance(key, tuple):
                # Plural entries are keyed (msgid, form index).
                key, form = key
                if form != 0:
                    stats.skipped["plural_form"] += 1
                    continue
            if key == "":
                stats.skipped["header"] += 1
                continue
            context_stripped = "\x04" in key
            source = key.split("\x04", 1)[-1]
            collapsed_source = " ".join(source.split())
            target = " ".join(translation.split())
            if not target:
                stats.skipped["untranslated"] += 1
                continue
            if target == collapsed_source:
                stats.skipped["identical"] += 1
                continue
            if (collapsed_source, target) in seen:
                stats.skipped["duplicate"] += 1
                continue
            seen.add((collapsed_source, target))
            stats.contexts_stripped += context_stripped
            stats.whitespace_collapsed += (collapsed_source, target) != (source, translation)
            split = split_of(collapsed_source, valid_fraction, test_fraction)
            pairs[split].append((collapsed_source, target))
    stats.pairs = len(seen)
    logger.info("%s", stats)

    def corpus(name):
        ordered = sorted(pairs[name])
        origin = f"{PIP_NAME} ({name})"
        return ParallelCorpus(
            [source for source, _ in ordered],
            [target for _, target in ordered],
            ReadStats(origin, lines=len(ordered), pairs=len(ordered)),
        )

    return JupyterLabFr(corpus("train"), corpus("valid"), corpus("test"), stats)
