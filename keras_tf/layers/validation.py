"""Input checks shared by the layers: each error says what was received and what was expected."""

import keras


def clone_initializer(initializer):
    """A fresh copy, so that sublayers do not share one seeded initializer."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


def check_last_dim(layer, name, shape, expected):
    if shape is None or len(shape) != 3:
        raise ValueError(
            f"{layer.__class__.__name__} '{layer.name}' expects {name} of rank 3 "
            f"[batch, length, {expected}]; received shape {tuple(shape) if shape else shape}"
        )
    if shape[-1] is not None and shape[-1] != expected:
        raise ValueError(
            f"{layer.__class__.__name__} '{layer.name}' expects {name} with last "
            f"dimension d_model={expected}; received shape {tuple(shape)}"
        )


def check_token_ids(layer, tokens, max_length, start_index=0):
    """Token ids must be an integer tensor [batch, length] with length <= max_length."""
    dtype = keras.backend.standardize_dtype(tokens.dtype)
    if "int" not in dtype:
        raise TypeError(
            f"{layer.__class__.__name__} '{layer.name}' expects integer token ids; "
            f"received dtype {dtype}. Cast the ids with ops.cast(tokens, 'int32')."
        )
    shape = tuple(tokens.shape)
    if len(shape) != 2:
        raise ValueError(
            f"{layer.__class__.__name__} '{layer.name}' expects token ids of rank 2 "
            f"[batch, length]; received shape {shape}"
        )
    length = shape[1]
    if length is not None and isinstance(start_index, int):
        if start_index + length > max_length:
            raise ValueError(
                f"{layer.__class__.__name__} '{layer.name}': sequence of length "
                f"{length} (starting at position {start_index}) is longer than "
                f"max_length={max_length}. Truncate the input or build the model "
                "with a larger max length."
            )
