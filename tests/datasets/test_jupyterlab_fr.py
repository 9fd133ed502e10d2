import importlib.resources

import pytest
import tensorflow as tf

from keras_tf.datasets import jupyterlab_fr, load_jupyterlab_fr
from keras_tf.text import read_tsv


@pytest.fixture(scope="module")
def demo():
    return load_jupyterlab_fr()


def test_loads_thousands_of_clean_pairs(demo):
    splits = demo.splits()
    total = sum(len(corpus) for corpus in splits.values())
    assert total == demo.stats.pairs > 2500
    # Every catalog entry is either kept or counted under a reason.
    assert demo.stats.entries == demo.stats.pairs + sum(demo.stats.skipped.values())
    assert demo.stats.catalogs >= 10 and demo.stats.skipped["header"] == demo.stats.catalogs
    assert demo.stats.contexts_stripped > 0
    for corpus in splits.values():
        for source, target in corpus:
            assert source and target and source != target
            assert source == " ".join(source.split()) and target == " ".join(target.split())
            assert "\x04" not in source
    everything = set(demo.train) | set(demo.valid) | set(demo.test)
    assert ("Close Tab", "Fermer l'onglet") in everything
    assert ("Restart Kernel", "Redémarrer le noyau") in everything


def test_splits_are_disjoint_and_deterministic(demo):
    sources = {name: set(corpus.sources) for name, corpus in demo.splits().items()}
    assert not sources["train"] & sources["valid"]
    assert not sources["train"] & sources["test"]
    assert not sources["valid"] & sources["test"]
    pairs = [list(corpus) for corpus in demo.splits().values()]
    assert len({pair for split in pairs for pair in split}) == sum(map(len, pairs))
    total = demo.stats.pairs
    for name in ("valid", "test"):
        assert 0.07 < len(getattr(demo, name)) / total < 0.13
    again = load_jupyterlab_fr()
    assert [list(c) for c in again.splits().values()] == pairs
    other = load_jupyterlab_fr(valid_fraction=0.2, test_fraction=0.0)
    assert len(other.test) == 0 and 0.17 < len(other.valid) / total < 0.23


def test_datasets_and_tsv(demo, tmp_path):
    datasets = demo.as_datasets()
    assert int(datasets["valid"].cardinality()) == len(demo.valid)
    first = next(iter(datasets["valid"]))
    first_pair = tuple(t.numpy().decode() for t in first)
    assert first_pair == (demo.valid.sources[0], demo.valid.targets[0])
    assert first[0].dtype == tf.string
    paths = demo.write_tsv(tmp_path)
    for name, path in paths.items():
        corpus = read_tsv(path)
        assert list(corpus) == list(getattr(demo, name))
        assert corpus.stats.total_skipped == 0


def test_missing_package_names_the_extra(monkeypatch):
    def missing(package):
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(ImportError, match=r"\.\[demo\]"):
        load_jupyterlab_fr()


def test_fractions_are_checked():
    with pytest.raises(ValueError, match="received valid_fraction=1.5"):
        load_jupyterlab_fr(valid_fraction=1.5)
    with pytest.raises(ValueError, match="valid_fraction=0.5, test_fraction=0.5"):
        load_jupyterlab_fr(valid_fraction=0.5, test_fraction=0.5)
    assert jupyterlab_fr.SPLITS == ("train", "valid", "test")
