"""Weight merging: θ₀ + α(θ_ft − θ₀), a fine-tuned model moved back toward its start.

Interpolating the weights of a fine-tuned model with those it started from
("WiSE-FT", Wortsman et al. 2021, arXiv 2109.01903) trades what the run
learned against what the start knew, at no training cost: α = 0 is the
start, α = 1 the fine-tuned model. Measured on an imported OPUS-MT-format
model (issue #58): α 0.5 kept 95 % of the original domain's BLEU where the
fine-tuned model kept 32 %.

`merge_weights` does the arithmetic on two backbones of one architecture;
`merge_presets` writes a complete preset (`keras-tf merge`). A LoRA run's
`model.keras` holds its factors merged into the kernels, so it merges (and
is merged again) as any other.
"""

import math
import os

import numpy as np

from keras_tf.option_error import OptionError
from keras_tf.translation import presets

# The α a run with --general-valid tries, largest first: a tenth apart.
ALPHAS = tuple(round(1 - i / 10, 1) for i in range(11))

# TransformerConfig fields that change no weight: two models differing in
# them alone still merge.
_WEIGHTLESS_FIELDS = ("dropout", "attention_dropout")


def check_alpha(alpha, name="alpha"):
    """Raise `OptionError` unless `alpha` is a finite number in [0, 1]; return it as a float."""
    if (isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating))
            or not math.isfinite(alpha) or not 0 <= alpha <= 1):
        raise OptionError(
            [(name, alpha)],
            "must be a number in [0, 1] (0: the base model, 1: the tuned one)",
        )
    return float(alpha)


def check_mergeable(base, tuned, base_name="base", tuned_name="tuned"):
    """Raise `OptionError` unless backbones `base` and `tuned` have one architecture.

    The same `TransformerConfig` (dropout aside) means the same variables of
    the same shapes, the vocabulary sizes included.
    """
    a = base.config.to_dict()
    b = tuned.config.to_dict()
    differ = [name for name in a if name not in _WEIGHTLESS_FIELDS and a[name] != b.get(name)]
    if differ:
        changed = ", ".join(f"{name} {a[name]} and {b.get(name)}" for name in differ)
        raise OptionError(
            [(base_name, base_name), (tuned_name, tuned_name)],
            f"not the same architecture ({changed}); merging needs two models of one "
            "architecture and vocabulary, one fine-tuned from the other",
        )


def merge_weights(base, tuned, alpha):
    """Set `tuned`'s weights to (1 − α)·θ_base + α·θ_tuned; return `tuned`.

    Computed in float64 and rounded once: α = 0 gives the base weights, α = 1
    the tuned ones, exactly. Variables that are not floating point keep
    `tuned`'s values.

    Args:
        base: the `Seq2SeqTransformer` the fine-tuning started from (θ₀).
        tuned: the fine-tuned one (θ_ft), of the same architecture.
        alpha: α in [0, 1].

    Example:
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> config = get_preset("transformer_tiny")
        >>> base, tuned = Seq2SeqTransformer(config), Seq2SeqTransformer(config)
        >>> merged = merge_weights(base, tuned, 0.0)
        >>> all((m == b).all() for m, b in zip(merged.get_weights(), base.get_weights()))
        True
    """
    check_mergeable(base, tuned)
    tuned.set_weights(merged_weights(base.get_weights(), tuned.get_weights(), alpha))
    return tuned


def merged_weights(base_weights, tuned_weights, alpha):
    """The list of (1 − α)·θ_base + α·θ_tuned, numpy array by array (see `merge_weights`)."""
    alpha = check_alpha(alpha)
    merged = []
    for start, end in zip(base_weights, tuned_weights):
        if np.issubdtype(end.dtype, np.floating):
            value = (1.0 - alpha) * start.astype(np.float64) + alpha * end.astype(np.float64)
            end = value.astype(end.dtype)
        merged.append(end)
    return merged


def choose_alpha(score, start_score, keep, alphas=ALPHAS):
    """The largest α of `alphas` whose merge scores at least `keep` × `start_score`.

    Tries them largest first and stops at the first that keeps enough, so a
    fine-tuned model that already keeps costs one score. α = 0 is the start
    itself, which always keeps.

    Args:
        score: `score(alpha)`, e.g. the BLEU of that merge on the domain to keep.
        start_score: the starting model's score (α = 0).
        keep: the share of `start_score` to keep, in (0, 1].
        alphas: the grid. Defaults to `ALPHAS`: 1.0, 0.9, ..., 0.0.

    Returns:
        `(alpha, scores)`: the chosen α and `{alpha: score}` of those tried.

    Example:
        >>> choose_alpha(lambda a: 100 - 60 * a, 100.0, 0.9)[0]
        0.1
    """
    scores = {}
    for alpha in sorted(alphas, reverse=True):
        scores[alpha] = start_score if alpha == 0 else float(score(alpha))
        if scores[alpha] >= keep * start_score:
            return alpha, scores
    return 0.0, scores


def _files(folder):
    """`{relative path: bytes}` of every file under `folder`."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                found[os.path.relpath(path, folder)] = file.read()
    return found


def _same_vocabulary(base_dir, tuned_dir):
    """Whether the two presets' `tokenizers/` folders hold the same files, byte for byte."""
    folders = [os.path.join(d, presets.TOKENIZERS_DIR) for d in (base_dir, tuned_dir)]
    if not all(os.path.isdir(folder) for folder in folders):
        return True  # a preset without tokenizers: the vocabulary sizes decide
    return _files(folders[0]) == _files(folders[1])


def merge_presets(base_dir, tuned_dir, alpha, out_dir):
    """Write `out_dir`: a complete preset of (1 − α)·θ_base + α·θ_tuned.

    Its tokenizers and `decoding.json` are the tuned run's;
    `metadata.json` records the merge.

    Args:
        base_dir: the preset fine-tuning started from.
        tuned_dir: the fine-tuned preset (`keras-tf train --init-from base_dir`).
        alpha: α in [0, 1]: 0 is the base, 1 the tuned model.
        out_dir: the new preset directory (made if missing).

    Returns:
        The merged `Seq2SeqTransformer`.
    """
    alpha = check_alpha(alpha)
    base = presets.load_backbone(base_dir)
    tuned = presets.load_backbone(tuned_dir)
    check_mergeable(base, tuned, "base", "tuned")
    if not _same_vocabulary(base_dir, tuned_dir):
        raise OptionError(
            [("base", base_dir), ("tuned", tuned_dir)],
            f"not the same vocabulary (their {presets.TOKENIZERS_DIR}/ differ); merging needs "
            "two models of one architecture and vocabulary, one fine-tuned from the other",
        )
    merged = merge_weights(base, tuned, alpha)
    os.makedirs(out_dir, exist_ok=True)
    presets.copy_text_files(tuned_dir, out_dir)
    presets.write_backbone(out_dir, merged)
    presets.write_metadata(out_dir, merged=merge_record(base_dir, tuned_dir, alpha))
    return merged


def merge_record(base_dir, tuned_dir, alpha):
    """What `metadata.json` says of a merge: the two presets and α."""
    return {"base": os.path.abspath(base_dir), "tuned": os.path.abspath(tuned_dir),
            "alpha": float(alpha)}
