#!/usr/bin/env bash
# OpenNMT-tf's own virtual environment, for benchmarks/learning.py --peer opennmt-tf.
#
# OpenNMT-tf 2.32.0 (its last release) needs TensorFlow < 2.14 (OpenNMT-tf
# #1008), so it cannot share the project's environment; it is never a
# dependency of the package. This makes a Python 3.11 venv beside the checkout
# with the pins that install and train on the benchmark machine:
#   opennmt-tf 2.32.0, tensorflow 2.13.1, tensorflow-addons 0.21.0;
#   pyonmttok, for OpenNMT-tf's `OpenNMTTokenizer` with a SentencePiece model
#     (its tokenization docs' recommended way; it also learns the model);
#   sacrebleu at the project's version, so both sides score with one signature.
# It downloads about 600 MB from PyPI.
#
# Usage: benchmarks/opennmt_venv.sh [VENV_DIR]   (default benchmarks/.opennmt-venv)
#        PYTHON=/path/to/python3.11 benchmarks/opennmt_venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-benchmarks/.opennmt-venv}"
python="${PYTHON:-python3.11}"
if ! command -v "$python" >/dev/null 2>&1; then
    python=/root/.pyenv/versions/3.11.7/bin/python3.11
fi
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || { echo "opennmt_venv.sh: needs Python 3.11 (set PYTHON=...)" >&2; exit 2; }
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet \
    "opennmt-tf==2.32.0" "tensorflow==2.13.1" "tensorflow-addons==0.21.0" \
    "pyonmttok>=1.37,<2" "sacrebleu==2.6.0"
"$venv/bin/python" -c 'import opennmt, pyonmttok, sacrebleu, tensorflow as tf; print("opennmt-tf", opennmt.__version__, "tensorflow", tf.__version__, "pyonmttok", pyonmttok.__version__, "sacrebleu", sacrebleu.__version__)'
