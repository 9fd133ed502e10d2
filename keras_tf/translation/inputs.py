"""What a translator was given: text or token ids, lists or `tf.data` of either.

TensorFlow is looked up, not imported: a `tf.Tensor` or a `tf.data.Dataset`
means it is imported already, and without it the input cannot be one.
"""

import sys

import numpy as np


def as_texts(values):
    """`(texts, single)` for text, `(None, False)` for anything else (token ids).

    Text is a string; a non-empty list, tuple or 1-D numpy array of strings;
    or a tf.string tensor of rank 0 or 1. `texts` is a list of `str` or
    `bytes`; `single` says that one string came in, so one goes out.

    Example:
        >>> as_texts("a cat"), as_texts(["a", "b"]), as_texts([[5, 6, 3]])
        ((['a cat'], True), (['a', 'b'], False), (None, False))
    """
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(values, tf.Tensor) and values.dtype == tf.string:
        values = values.numpy()  # bytes for a scalar, an object array otherwise
    if isinstance(values, (str, bytes)):
        return [values], True
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "USO":
        values = values.tolist()
    if isinstance(values, (list, tuple)) and values:
        if all(isinstance(v, (str, bytes)) for v in values):
            return list(values), False
    return None, False


def misplaced_item(values, name):
    """The one line naming the first item of the list `values` that is neither a string nor ids, or None.

    A list holds strings, or rows of token ids: `["a", 5]` names item 1 (an
    int among strings), `[123]` and `[None]` item 0 (neither a string nor a
    row of ids), `[["a"]]` item 0 (a list of strings). Token id rows and
    anything that is not a list are left to the id checks (None).

    Example:
        >>> misplaced_item(["a", 5], "inputs")
        'inputs[1] is int, not a string: pass a list of strings, or token ids as an int array [batch, S]'
        >>> misplaced_item([[5, 6, 3]], "inputs") is None
        True
    """
    if not isinstance(values, (list, tuple)) or not values:
        return None
    strings = [isinstance(value, (str, bytes)) for value in values]
    if all(strings):
        return None
    rows = [isinstance(value, (list, tuple, np.ndarray)) for value in values]
    if any(strings):
        index = strings.index(False)
    elif not all(rows):
        index = rows.index(False)
    else:
        index = next((i for i, row in enumerate(values)
                      if any(isinstance(item, (str, bytes)) for item in np.ravel(row).tolist())),
                     None)
        if index is None:
            return None  # rows of ids
        return (f"{name}[{index}] is a {type(values[index]).__name__} of strings: pass one "
                "string per item")
    return (f"{name}[{index}] is {type(values[index]).__name__}, not a string: pass a list of "
            "strings, or token ids as an int array [batch, S]")


def is_text(values):
    """Whether `values` is text (see `as_texts`)."""
    return as_texts(values)[0] is not None


def is_empty_list(values):
    """Whether `values` is an empty list or tuple: no text and no ids."""
    return isinstance(values, (list, tuple)) and not values


def is_dataset(values):
    """Whether `values` is a `tf.data.Dataset`."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(values, tf.data.Dataset)


def is_strings_dataset(values):
    """Whether `values` is a `tf.data.Dataset` of single strings, batched or not."""
    if not is_dataset(values):
        return False
    tf = sys.modules["tensorflow"]
    spec = values.element_spec
    return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string and spec.shape.rank in (0, 1)


def is_pairs_dataset(values):
    """Whether `values` is a `tf.data.Dataset` of `(source, target)` strings, batched or not."""
    if not is_dataset(values):
        return False
    tf = sys.modules["tensorflow"]
    spec = values.element_spec
    return (
        isinstance(spec, tuple)
        and len(spec) == 2
        and all(getattr(s, "dtype", None) == tf.string for s in spec)
    )


def holds_strings(values):
    """Whether `values` is text or a `tf.data.Dataset` with a string anywhere in its elements."""
    if is_text(values):
        return True
    if not is_dataset(values):
        return False
    tf = sys.modules["tensorflow"]
    return any(spec.dtype == tf.string for spec in tf.nest.flatten(values.element_spec))


def text_pairs(sources, targets, names):
    """Two lists of strings of one length, or a ValueError that says which argument is wrong.

    `names` are the two arguments' names in the caller, e.g. `("x", "y")`.
    """
    lists = []
    for name, values in zip(names, (sources, targets)):
        texts, _ = as_texts(values)
        misplaced = misplaced_item(values, name)
        if misplaced:
            raise TypeError(misplaced)
        if texts is None and not is_empty_list(values):
            raise ValueError(
                f"{name} must be strings to pair with the strings of {' and '.join(names)}; "
                f"received {'None' if values is None else type(values).__name__}"
            )
        lists.append(texts or [])
    if len(lists[0]) != len(lists[1]):
        raise ValueError(
            f"{' and '.join(names)} must hold one target per source; received "
            f"{len(lists[0])} sources and {len(lists[1])} targets"
        )
    return lists
