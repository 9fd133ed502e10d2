"""The OpenNMT-tf peer trains on the pairs `load_bible("fr")` gives, split for split.

benchmarks/opennmt_peer.py writes them as line-aligned text files for
OpenNMT-tf; read back, each split has the same pairs (counts and a hash).
"""

import importlib.util
import pathlib

import pytest

from keras_tf.datasets import load_bible
from keras_tf.text import ParallelCorpus

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _peer_module():
    spec = importlib.util.spec_from_file_location(
        "opennmt_peer", ROOT / "benchmarks" / "opennmt_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer = _peer_module()


def test_the_files_hold_the_bibles_pairs_split_for_split(tmp_path):
    bible = load_bible("fr")
    splits = {split: getattr(bible, split) for split in peer.SPLITS}
    paths = peer.write_split_files(splits, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "test.en", "test.fr", "train.en", "train.fr", "valid.en", "valid.fr"]
    read = peer.read_split_files(paths)
    for split, corpus in splits.items():
        sources, targets = read[split]
        assert len(sources) == len(targets) == len(corpus) > 0, split
        assert peer.pairs_digest(sources, targets) == peer.pairs_digest(
            corpus.sources, corpus.targets), split
    # The three splits together are every pair kept, each once.
    assert sum(len(read[split][0]) for split in peer.SPLITS) == bible.stats.pairs


def test_a_line_break_inside_a_text_is_refused(tmp_path):
    corpus = ParallelCorpus(["one", "two\nthree"], ["un", "deux trois"])
    with pytest.raises(ValueError, match=r"train pair 2: a line break in 'two\\nthree'"):
        peer.write_split_files({"train": corpus}, tmp_path)


def test_a_variant_is_its_settings():
    assert peer.parse_variant("batch_size=2048 effective_batch_size=none warmup_steps=ours "
                              "dropout=0 size=base") == {
        "batch_size": 2048, "effective_batch_size": None, "warmup_steps": "ours",
        "dropout": 0.0, "size": "base"}
    with pytest.raises(SystemExit, match="'beam=4': expected KEY=VALUE"):
        peer.parse_variant("beam=4")
    # Noam's peak, scale * d^-0.5 * warmup^-0.5, set to a given one.
    scale = peer.noam_scale_for_peak(1.4e-3, 128, 400)
    assert scale * 128 ** -0.5 * 400 ** -0.5 == pytest.approx(1.4e-3)
