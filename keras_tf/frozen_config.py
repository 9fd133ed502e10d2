"""`replace`, `to_dict` and `from_dict` for the frozen config dataclasses of every floor.

And the two type checks their validation shares (`bool` is no number there).
"""

import dataclasses
import math

# The largest whole-number setting: sizes, lengths and counts become int32 tensors.
MAX_INT = 2**31 - 1
# The largest seed: numpy's and Keras's seeds are 32-bit.
MAX_SEED = 2**32 - 1


def is_int(value):
    """Whether `value` is an `int` and not a `bool`.

    Example:
        >>> is_int(3), is_int(True), is_int(3.0)
        (True, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    """Whether `value` is an `int` or a `float` and not a `bool`."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite(value):
    """Whether `value` is a number (`is_number`) and neither NaN nor infinite.

    Example:
        >>> is_finite(0.5), is_finite(float("nan")), is_finite(float("inf")), is_finite(10**400)
        (True, False, False, False)
    """
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond any float
        return False


class ConfigMethods:
    """`replace`, `to_dict` and `from_dict` of the frozen config dataclasses."""

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(
                f"Unknown {cls.__name__} fields {unknown}; expected some of {sorted(names)}"
            )
        return cls(**values)
