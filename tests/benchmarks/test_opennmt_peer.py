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


LOG = """\
2026-12-07 11:15:21.931000: I runner.py:310] Step = 100 ; steps/s = 4.00, tokens/s = 14562 (6000 source, 8562 target) ; Learning rate = 0.000118 ; Loss = 8.129620
some other line
2026-12-07 11:15:47.179000: I runner.py:310] Step = 200 ; steps/s = 2.00, tokens/s = 14565 (2000 source, 12565 target) ; Learning rate = 0.000234 ; Loss = 6.701893
2026-12-07 11:16:10.000000: I runner.py:310] Step = 250 ; steps/s = 5.00, tokens/s = 1 (5000 source, 1 target) ; Learning rate = 0.0003 ; Loss = 6.1
"""


def test_the_pieces_trained_on_add_up_from_the_logged_rates():
    # 100 steps of 1,500 pieces, 100 of 1,000, 50 of 1,000.
    assert peer.source_tokens_by_step(LOG) == [(100, 150_000.0), (200, 250_000.0),
                                               (250, 300_000.0)]
    # A step count that goes back is a new run in the same log: the count restarts.
    again = LOG + LOG.splitlines()[0] + "\n"
    assert peer.source_tokens_by_step(again)[-1] == (100, 150_000.0)
    assert peer.source_tokens_by_step("no training here") == []


def test_an_epoch_counts_the_source_pieces_of_the_pairs_its_filter_keeps():
    encode = str.split
    sources = ["a b c", "a " * 5, "a b"]
    targets = ["x", "y", "z " * 7]
    assert peer.epoch_source_tokens(sources, targets, encode) == 3 + 5 + 2
    # Over 4 pieces on either side: the second pair (source) and the third (target) are out.
    assert peer.epoch_source_tokens(sources, targets, encode, maximum_length=4) == 3


def test_the_step_at_a_number_of_epochs_is_interpolated_between_log_lines():
    points = [(100, 0.5), (200, 1.0), (300, 1.4)]
    assert peer.step_at_epochs(points, 0.25) == pytest.approx(50)
    assert peer.step_at_epochs(points, 1.0) == pytest.approx(200)
    assert peer.step_at_epochs(points, 1.2) == pytest.approx(250)
    assert peer.step_at_epochs(points, 1.5) is None
    assert peer.step_at_epochs([], 1) is None


def test_averaging_up_to_a_step_takes_the_last_kept_checkpoints_before_it(tmp_path):
    for step in (500, 1000, 1500, 2000, 2213):
        for suffix in ("index", "data-00000-of-00001"):
            (tmp_path / f"ckpt-{step}.{suffix}").write_text("")
    (tmp_path / "checkpoint").write_text("")
    assert peer.checkpoints_up_to(tmp_path, 1500, 8) == [500, 1000, 1500]
    assert peer.checkpoints_up_to(tmp_path, 1999, 2) == [1000, 1500]
    assert peer.checkpoints_up_to(tmp_path, 10_000, 8) == [500, 1000, 1500, 2000, 2213]
    with pytest.raises(SystemExit, match=r"no checkpoint at or before step 400 in .* "
                                         r"\(kept: \[500, 1000, 1500, 2000, 2213\]\)"):
        peer.checkpoints_up_to(tmp_path, 400, 8)
