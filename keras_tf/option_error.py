"""`OptionError`: a bad argument value, named the Python way and the command-line way."""


class OptionError(ValueError):
    """A `ValueError` that names the arguments at fault and their values.

    In Python it reads `batch_size=8 and batch_tokens=512: give one of them`;
    the command line shows the same error with its flags,
    `--batch-size 8 and --batch-tokens 512: give one of them` (`as_flags`).

    Args:
        options: `(name, value)` pairs, the Python argument names.
        reason: what is wrong, and what to do instead.

    Example:
        >>> error = OptionError([("batch_tokens", 32)], "too small")
        >>> str(error), error.as_flags()
        ('batch_tokens=32: too small', '--batch-tokens 32: too small')
    """

    def __init__(self, options, reason):
        self.options = list(options)
        self.reason = reason
        names = " and ".join(f"{name}={value!r}" for name, value in self.options)
        super().__init__(f"{names}: {reason}")

    def as_flags(self):
        """The message with `--flag value` for each argument."""
        flags = " and ".join(
            f"--{name.replace('_', '-')} {value}" for name, value in self.options
        )
        return f"{flags}: {self.reason}"
