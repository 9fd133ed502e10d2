"""benchmarks/learning.py draws its learning curve from a run's results and histories."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _learning_module():
    spec = importlib.util.spec_from_file_location("learning", ROOT / "benchmarks" / "learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plot_writes_the_png_it_names(tmp_path):
    # A two-epoch run of ours alone (--skip-peer), as learning.py writes it.
    (tmp_path / "results.json").write_text(json.dumps({
        "corpus": "reverse", "pairs": 50, "epochs": 2, "minutes": None, "peer": "keras-hub",
        "valid": 10, "test": 10, "seed": 0,
        "results": {"defaults": {"bleu": 40.0, "chrf": 50.0, "exact_percent": 10.0,
                                 "train_seconds": 3, "folder": "defaults"}},
    }))
    (tmp_path / "defaults").mkdir()
    (tmp_path / "defaults" / "history.csv").write_text(
        "epoch,loss,val_bleu,val_chrf\n0,3.0,10.0,20.0\n1,2.0,30.0,45.0\n")
    target = tmp_path / "learning.png"
    # The figure's path, not the last history's (the csv name was once returned and written).
    assert _learning_module().plot(str(tmp_path), str(target)) == str(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
