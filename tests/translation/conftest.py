"""The serving tests' shared exports, for the batching tests of the task."""

from tests.serving.conftest import beam_export, greedy_export  # noqa: F401  (fixtures)
