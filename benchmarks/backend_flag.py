"""`--backend NAME` for the benchmark scripts.

Keras reads `KERAS_BACKEND` once, when it is imported, so a script calls
`set_backend_from_argv()` before importing Keras (or anything that does).
"""

import os
import sys

BACKENDS = ("tensorflow", "jax")


def set_backend_from_argv(argv=None):
    """Set `KERAS_BACKEND` from `--backend NAME` (default: the environment, else tensorflow)."""
    argv = sys.argv[1:] if argv is None else argv
    name = os.environ.get("KERAS_BACKEND", "tensorflow")
    for i, arg in enumerate(argv):
        if arg == "--backend" and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--backend="):
            name = arg.split("=", 1)[1]
    if name not in BACKENDS:
        sys.exit(f"--backend must be one of {BACKENDS}; received {name!r}")
    os.environ["KERAS_BACKEND"] = name
    return name


def add_backend_argument(parser):
    """Declare `--backend` (already applied by `set_backend_from_argv`) for `--help`."""
    parser.add_argument(
        "--backend", choices=BACKENDS, default=os.environ["KERAS_BACKEND"],
        help="Keras backend (default: $KERAS_BACKEND, else tensorflow)",
    )
