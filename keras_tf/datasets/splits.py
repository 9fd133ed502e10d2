"""The train/valid/test split shared by the bundled corpora: a stable hash of a key.

A key (the English text, a verse reference) is hashed with SHA-256 and mapped
to [0, 1); the position picks the split. The split depends on nothing but the
key and the fractions, so it is the same on every machine and every run, and
all pairs with one key land in one split.
"""

import hashlib
import os

SPLITS = ("train", "valid", "test")


def check_fractions(valid_fraction, test_fraction):
    """Raise `ValueError` unless the fractions are in [0, 1) and leave a training split."""
    for name, value in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1); received {name}={value!r}")
    if valid_fraction + test_fraction >= 1.0:
        raise ValueError(
            "valid_fraction + test_fraction must leave a training split; received "
            f"valid_fraction={valid_fraction}, test_fraction={test_fraction}"
        )


def split_of(key, valid_fraction, test_fraction):
    """`"train"`, `"valid"` or `"test"` for `key` (a `str`), by its SHA-256.

    Example:
        >>> split_of("Genesis 1:1", 0.0, 0.0)
        'train'
    """
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    if position < test_fraction:
        return "test"
    if position < test_fraction + valid_fraction:
        return "valid"
    return "train"


class SplitCorpusMethods:
    """What a corpus split three ways offers: a mixin for dataclasses with `train`, `valid`, `test`."""

    def splits(self):
        """`{"train": ..., "valid": ..., "test": ...}` of `ParallelCorpus`."""
        return {name: getattr(self, name) for name in SPLITS}

    def as_datasets(self):
        """`{split: tf.data.Dataset}` of `(source, target)` string pairs."""
        return {name: corpus.to_dataset() for name, corpus in self.splits().items()}

    def write_tsv(self, directory):
        """Write `train.tsv`, `valid.tsv` and `test.tsv` into `directory`.

        Returns:
            `{split: path}` of the files written.
        """
        os.makedirs(directory, exist_ok=True)
        paths = {}
        for name, corpus in self.splits().items():
            paths[name] = os.path.join(directory, f"{name}.tsv")
            corpus.write_tsv(paths[name])
        return paths
