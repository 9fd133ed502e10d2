#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.py needs on the GPU host, downloaded here into .whl/.
#
# The host (KINDS.md of the device tool, 2026-11) runs Python 3.12 with JAX,
# NumPy, h5py, ml-dtypes, absl-py, rich, regex and packaging installed, and
# has no network and no TensorFlow. What it lacks: keras and its two small
# dependencies namex and optree (a binary wheel, so built for the host's
# Python), and keras-hub. Each at the version this checkout's environment
# has, so the GPU figures belong to the tested versions. keras-hub comes
# without its dependencies: it declares tensorflow-text, which the host
# cannot install and gpu_check.py does not need.
#
# Usage: benchmarks/gpu_wheels.sh [PYTHON_VERSION]   (default 3.12, the host's)
set -euo pipefail
python_version="${1:-3.12}"
python="${PYTHON:-python}"
cd "$(dirname "$0")/.."
requirements=$("$python" - <<'PY'
from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in ("keras", "keras-hub", "namex", "optree")))
PY
)
rm -rf .whl
# shellcheck disable=SC2086  # one requirement per word
"$python" -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
    --python-version "$python_version" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl $requirements
ls .whl
