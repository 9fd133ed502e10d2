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


def test_an_equal_time_run_is_drawn_by_minutes(tmp_path):
    # An equal-time run (--minutes 45): ours' curve from its backup's state.json
    # (the results of a run before the curve was written there), OpenNMT-tf's
    # from the results; each side's test star where its training stopped.
    learning = _learning_module()
    (tmp_path / "defaults" / "backup").mkdir(parents=True)
    (tmp_path / "defaults" / "backup" / "state.json").write_text(json.dumps({
        "epoch_train_seconds": [600, 1200],
        "history": [{"val_bleu": 10.0, "val_chrf": 30.0}, {"val_bleu": 20.0, "val_chrf": 40.0}],
    }))
    (tmp_path / "results.json").write_text(json.dumps({
        "corpus": "bible", "pairs": 100, "epochs": 16, "minutes": 45, "peer": "opennmt-tf",
        "valid": 10, "test": 10, "seed": 0,
        "results": {
            "defaults --max-minutes 45": {"bleu": 18.0, "chrf": 40.0, "train_seconds": 1300,
                                          "folder": "defaults"},
            "defaults --max-minutes 45, beam 4 (its default)": {"bleu": 21.0, "chrf": 42.0,
                                                                "train_seconds": 1300},
            "OpenNMT-tf onmt-1, averaged, beam 4": {
                "bleu": 22.0, "chrf": 43.0, "train_seconds": 2700,
                "valid_curve": [[900, 5.0, 20.0], [2700, 21.0, 41.0]]},
        },
    }))
    target = tmp_path / "learning.png"
    assert learning.plot_minutes(str(tmp_path), str(target)) == str(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The curve it read for ours: seconds, BLEU, chrF at each epoch's end.
    assert learning.ours_curve(str(tmp_path), "defaults") == [(600, 10.0, 30.0),
                                                             (1200, 20.0, 40.0)]


def test_ours_schedule_reads_the_peak_back_from_the_history(tmp_path):
    # `warmup_steps=ours` / `peak=ours` give OpenNMT-tf our run's schedule; the
    # default peak follows the token budget, so it is read back from the rates
    # logged at each epoch's end (optimizer.iterations updates done).
    from keras_tf.models.schedules import WarmupInverseSqrtSchedule, planned_warmup_steps

    learning = _learning_module()
    epochs, per_epoch, peak = 16, 50, 2.8e-3
    warmup = planned_warmup_steps(epochs * per_epoch)
    schedule = WarmupInverseSqrtSchedule(peak, warmup)
    history = [{"learning_rate": float(schedule(epoch * per_epoch))} for epoch in range(1, 5)]
    (tmp_path / "run" / "backup").mkdir(parents=True)
    (tmp_path / "run" / "backup" / "state.json").write_text(json.dumps(
        {"steps_per_epoch": per_epoch, "batches_per_update": 1, "history": history}))
    got_warmup, got_peak = learning.ours_schedule(str(tmp_path), "run", epochs)
    assert got_warmup == warmup == 80
    assert abs(got_peak - peak) < 1e-6 * peak
