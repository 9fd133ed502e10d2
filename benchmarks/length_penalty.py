"""Beam search's length penalty on a trained model: BLEU, chrF and length ratio of each setting.

Decoding only, on one model directory (from `keras-tf train` or `keras-tf
demo`) and its test TSV: greedy, beam 4 with the model's own settings, and
beam 4 with other length penalties, GNMT's ((5 + len) / 6)^α and len^α
(Hugging Face's and CTranslate2's form). The same search for every
setting; only the normalization of the finished hypotheses' scores differs.
sacreBLEU's length ratio (hypothesis length over reference length) shows
whether a setting writes translations too short.

Usage: python benchmarks/length_penalty.py --model DIR --test FILE [--beam-size 4]
           [--max-pairs N]
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()
# Over-long test sources are cut the same way for every setting; one warning each is noise.
warnings.filterwarnings("ignore", message=".*longer than max_source_length", category=UserWarning)

from keras_tf.decoding import DecodingConfig  # noqa: E402
from keras_tf.text import read_tsv  # noqa: E402
from keras_tf.training.bleu import corpus_scores  # noqa: E402
from keras_tf.translation import Seq2SeqTranslator  # noqa: E402

# (label, DecodingConfig fields); the model's own settings come first.
SETTINGS = (
    ("greedy", {"method": "greedy"}),
    ("beam, GNMT α 0.6", {"length_penalty": 0.6, "length_penalty_style": "gnmt"}),
    ("beam, GNMT α 1.0", {"length_penalty": 1.0, "length_penalty_style": "gnmt"}),
    ("beam, GNMT α 1.5", {"length_penalty": 1.5, "length_penalty_style": "gnmt"}),
    ("beam, len^0.6", {"length_penalty": 0.6, "length_penalty_style": "power"}),
    ("beam, len^1.0", {"length_penalty": 1.0, "length_penalty_style": "power"}),
    ("beam, α 0 (sum of log-probabilities)", {"length_penalty": 0.0}),
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a model directory")
    parser.add_argument("--test", required=True, help="source<TAB>reference, TSV")
    parser.add_argument("--beam-size", type=int, default=4, help="default: 4")
    parser.add_argument("--max-pairs", type=int, help="the first N test pairs")
    args = parser.parse_args()

    translator = Seq2SeqTranslator.from_preset(args.model)
    test = read_tsv(args.test)
    sources, references = test.sources[: args.max_pairs], test.targets[: args.max_pairs]
    print(f"{args.model}: {len(sources)} test pairs; its decoding: {translator.decoding}")
    print(f"{'setting':<40} {'BLEU':>6} {'chrF':>6} {'length ratio':>13}")
    for label, fields in (("its own decoding", {}), *SETTINGS):
        if fields.get("method") != "greedy" and label != "its own decoding":
            fields = {"method": "beam", "beam_size": args.beam_size, **fields}
        decoding = translator.decoding.replace(**fields) if fields else None
        hypotheses = translator.generate(list(sources), decoding=decoding)
        bleu, chrf = corpus_scores(hypotheses, list(references))
        print(f"{label:<40} {bleu.score:6.2f} {chrf.score:6.2f} "
              f"{bleu.sys_len / bleu.ref_len:13.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
