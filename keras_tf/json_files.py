"""JSON files written whole or not at all: the configs, options and metadata of a preset directory."""

import json
import os


def write_json(path, values):
    """Write `values` to a temporary file, then rename it to `path`: a kill leaves no half file."""
    temporary = f"{path}.partial"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(values, file, indent=2, ensure_ascii=False)
        file.write("\n")
    os.replace(temporary, path)


def read_json(path):
    """The JSON value in `path`, read as UTF-8."""
    with open(path, encoding="utf-8") as file:
        return json.load(file)
