"""`onmt-main` with a wall-clock budget: run by OpenNMT-tf's own Python, not the project's.

    benchmarks/.opennmt-venv/bin/python benchmarks/opennmt_budget.py SECONDS LOG onmt-main-args...

OpenNMT-tf 2.32 stops training at `train.max_step` only. For an equal-time
comparison with `keras-tf train --max-minutes`, this runs `onmt-main` as
its `main` does, with its trainer's step generator wrapped so that training
stops after the step in progress once SECONDS are spent, counted from the
first step (its trace included; the data and model set-up before it are
not), as ours counts them. The trainer then ends as it does at `max_step`:
it saves a checkpoint, evaluates it, and (with `--auto_config`'s
`average_last_checkpoints`) averages the last checkpoints into MODEL_DIR/avg.
Evaluations during training count in the budget, as our per-epoch
validation does.

Each evaluation's metrics go to LOG (one JSON object a line: `step`,
`seconds` of training time when it ended, and the metrics, e.g. `loss`,
`bleu`, `chrf`): the learning curve over time.

It wraps two methods of OpenNMT-tf 2.32's own classes (`Trainer._steps`,
`Evaluator.__call__`): the one release this script is for
(benchmarks/opennmt_venv.sh pins it).
"""

import json
import sys
import time

from opennmt import evaluation, training
from opennmt.bin import main as onmt_main


def run(seconds, log_path, argv):
    clock = {"start": None}
    steps = training.Trainer._steps
    evaluate = evaluation.Evaluator.__call__

    def budgeted_steps(self, dataset, accum_steps=1):
        if clock["start"] is None:
            clock["start"] = time.monotonic()
        for loss in steps(self, dataset, accum_steps=accum_steps):
            yield loss
            # Asked for the next step: the last one, its checkpoint and its
            # evaluation are done.
            if time.monotonic() - clock["start"] >= seconds:
                print(f"opennmt_budget: stopped at the time budget of {seconds / 60:g} minutes",
                      file=sys.stderr, flush=True)
                return

    def logged_evaluation(self, step):
        metrics = evaluate(self, step)
        spent = time.monotonic() - clock["start"] if clock["start"] is not None else 0.0
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"step": int(step), "seconds": round(spent, 1),
                                  **{name: float(value) for name, value in metrics.items()}})
                      + "\n")
        return metrics

    training.Trainer._steps = budgeted_steps
    evaluation.Evaluator.__call__ = logged_evaluation
    sys.argv = ["onmt-main", *argv]
    onmt_main.main()


if __name__ == "__main__":
    run(float(sys.argv[1]), sys.argv[2], sys.argv[3:])
