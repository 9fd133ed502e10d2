"""Readers for parallel corpora that never lose a line silently.

Three layouts are read into the same in-memory `ParallelCorpus`:

* a TSV file, one `source<TAB>target` pair per line (`read_tsv`);
* two line-aligned plain-text files, the Moses/OPUS layout (`read_aligned`);
* any `tf.data.Dataset` of `(source, target)` string scalars (`read_dataset`).

A malformed line raises `CorpusError` naming the file and the 1-based line
number. With `on_error="skip"` the line is skipped instead, counted under its
reason in `ReadStats.skipped`, and the counts are logged once at the end.
Both sides are stripped of leading and trailing whitespace; nothing else in
the text is changed.

`with_replay` mixes a sample of one corpus into another (mixed fine-tuning).

Over-long pairs are a matter of tokens, not characters, so they are handled
by the input pipeline (`keras_tf.text.pipeline.make_dataset`), which
truncates or filters them and reports the count.
"""

import collections
import dataclasses
import itertools
import logging
import random

import tensorflow as tf

logger = logging.getLogger("keras_tf.text")

ON_ERROR_CHOICES = ("raise", "skip")

# Every reason a line can be rejected for, in report order.
SKIP_REASONS = (
    "missing_tab",  # TSV line without a tab (an empty line included)
    "extra_tab",  # TSV line with more than one tab
    "empty_source",  # nothing but whitespace on the source side
    "empty_target",  # nothing but whitespace on the target side
    "invalid_utf8",  # bytes that do not decode as UTF-8
    "unaligned",  # a line of one aligned file with no counterpart in the other
)


class CorpusError(ValueError):
    """A malformed line of a parallel corpus.

    Args:
        origin: the file (or dataset) the line comes from.
        line: the 1-based line (or element) number.
        reason: one of `SKIP_REASONS`.
        detail: a human-readable description, quoting the offending text.
        unit: what `line` counts, `"line"` or `"element"` (of a dataset).
    """

    def __init__(self, origin, line, reason, detail, unit="line"):
        self.origin = origin
        self.line = line
        self.reason = reason
        super().__init__(
            f"{origin}, {unit} {line}: {detail} ({reason}). Fix the {unit}, or "
            f"pass on_error='skip' to skip such {unit}s and count them."
        )


@dataclasses.dataclass
class ReadStats:
    """What a reader saw: lines read, pairs kept, lines skipped per reason.

    Args:
        origin: the file(s) or dataset read.
        lines: lines (or dataset elements) read.
        pairs: pairs kept.
        skipped: a `collections.Counter` mapping a reason in `SKIP_REASONS`
            to the number of lines skipped for it.

    Example:
        >>> stats = ReadStats("train.tsv", lines=3, pairs=2)
        >>> stats.skipped["missing_tab"] += 1
        >>> str(stats)
        'train.tsv: 3 lines read, 2 pairs kept, 1 skipped (missing_tab=1)'
    """

    origin: str
    lines: int = 0
    pairs: int = 0
    skipped: collections.Counter = dataclasses.field(
        default_factory=collections.Counter
    )

    @property
    def total_skipped(self):
        return sum(self.skipped.values())

    def __str__(self):
        text = f"{self.origin}: {self.lines} lines read, {self.pairs} pairs kept"
        if not self.total_skipped:
            return text + ", none skipped"
        reasons = ", ".join(
            f"{reason}={self.skipped[reason]}"
            for reason in SKIP_REASONS
            if self.skipped[reason]
        )
        return text + f", {self.total_skipped} skipped ({reasons})"


@dataclasses.dataclass
class ParallelCorpus:
    """Source and target sentences, aligned by index, with how they were read.

    Args:
        sources: list of source sentences (`str`).
        targets: list of target sentences (`str`), `targets[i]` translating
            `sources[i]`.
        stats: the `ReadStats` of the reader that produced the corpus.

    Example:
        >>> corpus = ParallelCorpus(["Hello"], ["Bonjour"])
        >>> len(corpus), list(corpus)
        (1, [('Hello', 'Bonjour')])
    """

    sources: list
    targets: list
    stats: ReadStats = None

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ValueError(
                "sources and targets must have the same length; received "
                f"{len(self.sources)} sources and {len(self.targets)} targets"
            )
        if self.stats is None:
            self.stats = ReadStats(
                "in-memory", lines=len(self.sources), pairs=len(self.sources)
            )

    def __len__(self):
        return len(self.sources)

    def __iter__(self):
        return iter(zip(self.sources, self.targets))

    def to_dataset(self):
        """A `tf.data.Dataset` of `(source, target)` `tf.string` scalars."""
        return tf.data.Dataset.from_tensor_slices(
            (
                tf.constant(self.sources, dtype=tf.string, shape=[len(self)]),
                tf.constant(self.targets, dtype=tf.string, shape=[len(self)]),
            )
        )

    def write_tsv(self, path):
        """Write the pairs as UTF-8 `source<TAB>target` lines.

        Raises `ValueError`, naming the pair, if a sentence holds a tab or a
        line break, which the TSV layout cannot represent.
        """
        with open(path, "w", encoding="utf-8", newline="\n") as file:
            for index, (source, target) in enumerate(self):
                for side, text in (("source", source), ("target", target)):
                    if "\t" in text or "\n" in text or "\r" in text:
                        raise ValueError(
                            f"Cannot write pair {index + 1} to {path}: its {side} "
                            f"holds a tab or line break; received {text!r}"
                        )
                file.write(f"{source}\t{target}\n")


def with_replay(corpus, replay, ratio=1.0, seed=0):
    """`corpus` with `ratio` times as many pairs of `replay` mixed in: mixed fine-tuning.

    Fine-tuning a trained model on `corpus` alone makes it forget its
    original domain; rehearsing pairs of that domain beside the new ones
    keeps it (Chu et al., 2017, "mixed fine tuning"). The pairs of `replay`
    are drawn once, without replacement, from `seed`: the same on every run.

    Args:
        corpus: the new domain's `ParallelCorpus`.
        replay: a `ParallelCorpus` of the domain to keep.
        ratio: replayed pairs per pair of `corpus`. Defaults to 1.0. All of
            `replay` when it holds fewer.
        seed: seeds the draw. Defaults to 0.

    Returns:
        A `ParallelCorpus`: the pairs of `corpus`, then the replayed ones.

    Example:
        >>> new = ParallelCorpus(["a", "b"], ["A", "B"])
        >>> old = ParallelCorpus(["x", "y", "z"], ["X", "Y", "Z"])
        >>> len(with_replay(new, old)), len(with_replay(new, old, ratio=0.5))
        (4, 3)
    """
    if not ratio > 0:
        raise ValueError(f"ratio must be positive; received ratio={ratio!r}")
    count = min(len(replay), round(ratio * len(corpus)))
    drawn = random.Random(seed).sample(range(len(replay)), count)
    stats = ReadStats(
        f"{corpus.stats.origin} + {count} pairs of {replay.stats.origin}",
        lines=len(corpus) + count,
        pairs=len(corpus) + count,
    )
    return ParallelCorpus(
        list(corpus.sources) + [replay.sources[i] for i in drawn],
        list(corpus.targets) + [replay.targets[i] for i in drawn],
        stats,
    )


def _check_on_error(on_error):
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(
            f"on_error must be one of {ON_ERROR_CHOICES}; received on_error={on_error!r}"
        )


def _decode(raw, origin, line, unit="line"):
    """UTF-8 text of one line's bytes, or a `CorpusError` quoting the bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        around = raw[max(0, error.start - 12) : error.end + 12]
        raise CorpusError(
            origin,
            line,
            "invalid_utf8",
            f"invalid UTF-8 byte at offset {error.start}: {around!r}",
            unit,
        ) from None


def strip_line_end(line):
    """`line` (`bytes` or `str`) without its ending `\\n` or `\\r\\n`; any other CR stays.

    Lines end at `\\n` only, in every reader of the package: a lone CR is a
    character of its line, not a line break.

    Example:
        >>> strip_line_end("a\\rb\\r\\n"), strip_line_end(b"c\\n")
        ('a\\rb', b'c')
    """
    newline, cr = (b"\n", b"\r") if isinstance(line, bytes) else ("\n", "\r")
    if line.endswith(newline):
        line = line[:-1]
        if line.endswith(cr):
            line = line[:-1]
    return line


def _check_sides(source, target, origin, line, unit="line"):
    source, target = source.strip(), target.strip()
    if not source:
        raise CorpusError(
            origin, line, "empty_source", "the source side is empty", unit
        )
    if not target:
        raise CorpusError(
            origin, line, "empty_target", "the target side is empty", unit
        )
    return source, target


class _Collector:
    """Accumulates pairs; raises or counts a `CorpusError` per `on_error`."""

    def __init__(self, origin, on_error):
        _check_on_error(on_error)
        self.on_error = on_error
        self.stats = ReadStats(origin)
        self.sources = []
        self.targets = []

    def add(self, make_pair):
        """Count one line and keep the pair `make_pair()` returns."""
        self.stats.lines += 1
        try:
            source, target = make_pair()
        except CorpusError as error:
            if self.on_error == "raise":
                raise
            self.stats.skipped[error.reason] += 1
            return
        self.sources.append(source)
        self.targets.append(target)

    def skip_unaligned(self, error):
        self.stats.lines += 1
        if self.on_error == "raise":
            raise error
        self.stats.skipped[error.reason] += 1

    def finish(self):
        self.stats.pairs = len(self.sources)
        log = logger.warning if self.stats.total_skipped else logger.info
        log("%s", self.stats)
        return ParallelCorpus(self.sources, self.targets, self.stats)


def read_tsv(path, *, on_error="raise"):
    """Read a UTF-8 TSV file of `source<TAB>target` lines.

    Lines end with `\\n` or `\\r\\n`; a UTF-8 byte-order mark on the first
    line is ignored. Each side is stripped of surrounding whitespace.

    Args:
        path: the TSV file.
        on_error: `"raise"` (default) raises `CorpusError` at the first
            malformed line, naming `path` and the line number; `"skip"` skips
            malformed lines, counts them per reason in `corpus.stats.skipped`
            and logs the counts at the end.

    Returns:
        A `ParallelCorpus`.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.tsv"
        >>> _ = path.write_text("Hello\\tBonjour\\nno tab here\\n", encoding="utf-8")
        >>> corpus = read_tsv(path, on_error="skip")
        >>> list(corpus), dict(corpus.stats.skipped)
        ([('Hello', 'Bonjour')], {'missing_tab': 1})
    """
    origin = str(path)
    collector = _Collector(origin, on_error)

    def parse(raw, line):
        raw = strip_line_end(raw)
        if line == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        text = _decode(raw, origin, line)
        tabs = text.count("\t")
        if tabs == 0:
            detail = "the line is empty" if not text.strip() else "no tab"
            raise CorpusError(
                origin,
                line,
                "missing_tab",
                f"expected 'source<TAB>target', found {detail}: {text[:80]!r}",
            )
        if tabs > 1:
            raise CorpusError(
                origin,
                line,
                "extra_tab",
                f"expected one tab, found {tabs}: {text[:80]!r}",
            )
        source, target = text.split("\t")
        return _check_sides(source, target, origin, line)

    with open(path, "rb") as file:
        for line, raw in enumerate(file, start=1):
            collector.add(lambda: parse(raw, line))
    return collector.finish()


def read_aligned(source_path, target_path, *, on_error="raise"):
    """Read two line-aligned plain-text files (the Moses/OPUS layout).

    Line `i` of `source_path` translates line `i` of `target_path`. Files
    with different line counts are malformed: the first line without a
    counterpart is reported (or, with `on_error="skip"`, every such line is
    counted as `"unaligned"`).

    Args:
        source_path: the source-language file, UTF-8, one sentence a line.
        target_path: the target-language file, UTF-8, one sentence a line.
        on_error: `"raise"` (default) or `"skip"`, as in `read_tsv`.

    Returns:
        A `ParallelCorpus`.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "train.en").write_text("Hello\\nThanks\\n", encoding="utf-8")
        >>> _ = (folder / "train.fr").write_text("Bonjour\\nMerci\\n", encoding="utf-8")
        >>> list(read_aligned(folder / "train.en", folder / "train.fr"))
        [('Hello', 'Bonjour'), ('Thanks', 'Merci')]
    """
    source_origin, target_origin = str(source_path), str(target_path)
    collector = _Collector(f"{source_origin} + {target_origin}", on_error)

    def parse(raw_source, raw_target, line):
        source = _decode(strip_line_end(raw_source), source_origin, line)
        target = _decode(strip_line_end(raw_target), target_origin, line)
        source, target = source.strip(), target.strip()
        if not source:
            raise CorpusError(
                source_origin, line, "empty_source", "the source line is empty"
            )
        if not target:
            raise CorpusError(
                target_origin, line, "empty_target", "the target line is empty"
            )
        return source, target

    with open(source_path, "rb") as source_file, open(target_path, "rb") as target_file:
        lines = itertools.zip_longest(source_file, target_file)
        for line, (raw_source, raw_target) in enumerate(lines, start=1):
            if raw_source is None or raw_target is None:
                longer, shorter = (
                    (source_origin, target_origin)
                    if raw_target is None
                    else (target_origin, source_origin)
                )
                collector.skip_unaligned(
                    CorpusError(
                        longer,
                        line,
                        "unaligned",
                        f"{shorter} has only {line - 1} lines, so this line has "
                        "no counterpart",
                    )
                )
                continue
            collector.add(lambda: parse(raw_source, raw_target, line))
    return collector.finish()


def read_dataset(dataset, *, on_error="raise", name="dataset"):
    """Read a `tf.data.Dataset` of `(source, target)` string scalars.

    The dataset is iterated once, eagerly; element numbers in errors are
    1-based like line numbers. The checks are those of `read_tsv` that apply
    to strings already split: invalid UTF-8 and empty sides.

    Args:
        dataset: a finite `tf.data.Dataset` whose elements are
            `(source, target)` pairs of `tf.string` scalars.
        on_error: `"raise"` (default) or `"skip"`, as in `read_tsv`.
        name: how errors and logs refer to the dataset.

    Returns:
        A `ParallelCorpus`.

    Example:
        >>> ds = tf.data.Dataset.from_tensor_slices((["Hello", ""], ["Bonjour", "Rien"]))
        >>> corpus = read_dataset(ds, on_error="skip")
        >>> list(corpus), dict(corpus.stats.skipped)
        ([('Hello', 'Bonjour')], {'empty_source': 1})
    """
    spec = dataset.element_spec
    if not (
        isinstance(spec, tuple)
        and len(spec) == 2
        and all(
            isinstance(s, tf.TensorSpec) and s.dtype == tf.string and s.shape.rank == 0
            for s in spec
        )
    ):
        raise ValueError(
            "read_dataset expects a dataset of (source, target) tf.string "
            f"scalars; received element_spec={spec}"
        )
    if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise ValueError(
            f"read_dataset needs a finite dataset; received {name} with infinite "
            "cardinality (drop .repeat())"
        )
    collector = _Collector(name, on_error)

    def parse(raw_source, raw_target, element):
        source = _decode(raw_source, name, element, "element")
        target = _decode(raw_target, name, element, "element")
        return _check_sides(source, target, name, element, "element")

    for element, (raw_source, raw_target) in enumerate(
        dataset.as_numpy_iterator(), start=1
    ):
        collector.add(lambda: parse(raw_source, raw_target, element))
    return collector.finish()
