"""Every docstring Example in keras_tf runs and prints what it shows.

The modules are found by walking the package, not listed by hand: a new
module's examples run as soon as it exists. A module with no example is
fine; one whose examples fail is not.
"""

import doctest
import importlib
import pkgutil

import pytest

import keras_tf

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(keras_tf.__path__, prefix="keras_tf.")
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_walk_finds_every_floor():
    floors = {name.split(".")[1] for name in MODULES}
    assert {"layers", "models", "decoding", "text", "serving", "translation", "training",
            "cli", "datasets"} <= floors
    assert len(MODULES) > 60


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    # Only the module's own objects, not what it imported.
    tests = [t for t in finder.find(module, name) if t.examples]
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed in {name}"
