"""The OpenNMT-tf peer of benchmarks/learning.py: its data files, its recipe, its runs.

OpenNMT-tf 2.32 needs TensorFlow < 2.14, so it runs in its own virtual
environment (benchmarks/opennmt_venv.sh makes it), as subprocesses; this
module runs in the project's environment and imports neither.

* `write_split_files`: the pairs of each split (those of `load_bible("fr")`
  in the benchmark) as line-aligned source and target text files, OpenNMT-tf's
  input; `read_split_files` reads them back (a test checks the round trip on
  the Bible: the same counts and hash).
* `OpenNmtRun`: one run of its documented recipe, `onmt-main --auto_config`
  with its `Transformer` at our default preset's size (a model file), plus
  the settings a variant changes; SentencePiece through its tokenizer
  configuration (`OpenNMTTokenizer` with `sp_model_path`), the model learned
  by `onmt-build-vocab --sentencepiece` on the training files of both sides
  (one shared vocabulary, as ours); trained for a wall-clock budget
  (benchmarks/opennmt_budget.py) with its evaluation (BLEU, chrF) every
  `eval_steps`; its last checkpoints averaged as `--auto_config` does at the
  end of training (`average_last_checkpoints: 8`); then `onmt-main infer`
  on the test sources with its default decoding (auto_config's beam 4) and
  greedy, detokenized by its tokenizer.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_VENV = os.path.join(ROOT, "benchmarks", ".opennmt-venv")
BUDGET_SCRIPT = os.path.join(ROOT, "benchmarks", "opennmt_budget.py")
SPLITS = ("train", "valid", "test")
# auto_config's recipe for its Transformer (opennmt/models/transformer.py, 2.32).
RECIPE = {"batch_size": 3072, "effective_batch_size": 25000, "warmup_steps": 8000,
          "learning_rate": 2.0, "dropout": 0.1}
# What a variant may set (`--onmt "key=value ..."`): RECIPE's keys, and
# `size`: "ours" (our default preset's d_model, heads, d_ff and layers) or
# "base" (its TransformerBase); `peak`: "ours" scales Noam's learning rate
# so that its peak, at the end of the warm-up, is our schedule's; `tokenizer`:
# "own" (default, learned by its recipe) or "ours" (our run's SentencePiece
# model, OUT/defaults/tokenizers/shared.spm, the same segmentation).
KEYS = (*RECIPE, "size", "peak", "tokenizer")
# auto_config's training filter: pairs with either side over this many pieces are left out.
MAXIMUM_LENGTH = 100
# Its trainer's log line every 100 steps: the rates since the last one.
STEP_LINE = re.compile(r"Step = (\d+) ; steps/s = ([\d.]+), tokens/s = \d+ "
                       r"\((\d+) source, \d+ target\)")


def write_split_files(splits, directory, source="en", target="fr"):
    """Write each split's pairs as `DIR/SPLIT.SOURCE` and `DIR/SPLIT.TARGET`, one text a line.

    Args:
        splits: `{split: ParallelCorpus}` (or anything with `sources` and
            `targets` lists of strings).
        directory: where the files go (created).
        source, target: the file suffixes.

    Returns:
        `{split: (source_path, target_path)}`.

    Raises:
        ValueError: a text holds a line break, which would shift every later line.
    """
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for split, corpus in splits.items():
        paths[split] = tuple(os.path.join(directory, f"{split}.{side}") for side in (source, target))
        for path, texts in zip(paths[split], (corpus.sources, corpus.targets)):
            for index, text in enumerate(texts):
                if "\n" in text or "\r" in text:
                    raise ValueError(f"{split} pair {index + 1}: a line break in {text!r}")
            with open(path, "w", encoding="utf-8", newline="\n") as file:
                file.write("".join(f"{text}\n" for text in texts))
    return paths


def read_split_files(paths):
    """`{split: (sources, targets)}` of the files `write_split_files` wrote."""
    read = {}
    for split, (source_path, target_path) in paths.items():
        sides = []
        for path in (source_path, target_path):
            with open(path, encoding="utf-8", newline="") as file:
                sides.append(file.read().split("\n")[:-1])
        read[split] = tuple(sides)
    return read


def pairs_digest(sources, targets):
    """A SHA-256 of the pairs, in order: equal digests, equal data."""
    digest = hashlib.sha256()
    for source, target in zip(sources, targets, strict=True):
        digest.update(f"{source}\t{target}\n".encode("utf-8"))
    return digest.hexdigest()


def source_tokens_by_step(log_text):
    """`[(step, source pieces trained on so far)]` from the trainer's log lines.

    Each line gives the steps and source pieces a second since the one before;
    their ratio is the pieces a step over those steps (evaluations slow both
    rates alike). A step count that goes back starts a new run: the count restarts.
    """
    points, total, last = [], 0.0, 0
    for match in STEP_LINE.finditer(log_text):
        step, steps_per_second, sources_per_second = (
            int(match[1]), float(match[2]), int(match[3]))
        if step <= last:
            points, total, last = [], 0.0, 0
        if steps_per_second > 0:
            total += (step - last) * sources_per_second / steps_per_second
        points.append((step, total))
        last = step
    return points


def epoch_source_tokens(sources, targets, encode, maximum_length=MAXIMUM_LENGTH):
    """Source pieces in one pass over the pairs its training keeps.

    `encode(text)` is the pieces; a pair with either side over `maximum_length`
    pieces is left out, as auto_config's length filter leaves it out.
    """
    total = 0
    for source, target in zip(sources, targets, strict=True):
        source_length, target_length = len(encode(source)), len(encode(target))
        if source_length <= maximum_length and target_length <= maximum_length:
            total += source_length
    return total


def step_at_epochs(epochs_by_step, epochs):
    """The step at which `epochs_by_step` (`[(step, epochs)]`) reaches `epochs`, or None.

    Linear between the logged steps (from step 0 at 0 epochs); None when the
    run never reached it.
    """
    last_step, last_epochs = 0, 0.0
    for step, seen in epochs_by_step:
        if seen >= epochs:
            share = (epochs - last_epochs) / (seen - last_epochs) if seen > last_epochs else 1.0
            return last_step + share * (step - last_step)
        last_step, last_epochs = step, seen
    return None


def checkpoints_up_to(model_dir, step, max_count):
    """The steps of the last `max_count` checkpoints in `model_dir` at or before `step`, oldest first.

    Raises:
        SystemExit: none is there, naming the steps that are.
    """
    kept = sorted(int(match[1]) for match in (
        re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(path))
        for path in glob.glob(os.path.join(model_dir, "ckpt-*.index"))) if match)
    chosen = [s for s in kept if s <= step][-max_count:]
    if not chosen:
        raise SystemExit(f"no checkpoint at or before step {step} in {model_dir} (kept: {kept})")
    return chosen


def venv_python(venv=DEFAULT_VENV):
    """The OpenNMT-tf environment's Python, or a `SystemExit` saying how to make it."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.isfile(python):
        raise SystemExit(f"no OpenNMT-tf environment at {venv}: run benchmarks/opennmt_venv.sh")
    return python


def parse_variant(text):
    """`"batch_size=2048 warmup_steps=ours"` -> `{"batch_size": 2048, "warmup_steps": "ours"}`."""
    settings = {}
    for word in text.split():
        key, _, value = word.partition("=")
        if key not in KEYS or not value:
            raise SystemExit(f"--onmt: {word!r}: expected KEY=VALUE with KEY one of {list(KEYS)}")
        if value in ("ours", "own", "base", "none"):
            settings[key] = None if value == "none" else value
        else:
            settings[key] = float(value) if key in ("learning_rate", "dropout") else int(value)
    return settings


def noam_scale_for_peak(peak, d_model, warmup_steps):
    """Noam's scale whose peak, `scale * d_model^-0.5 * warmup^-0.5`, is `peak`."""
    return peak * d_model ** 0.5 * warmup_steps ** 0.5


class OpenNmtRun:
    """One OpenNMT-tf run in `directory`: vocabulary, config, budgeted training, averaging, inference.

    Args:
        directory: its folder (created).
        files: `write_split_files`'s paths.
        settings: RECIPE's keys and `size`, after `"ours"` values are resolved.
        model: `{"d_model", "num_heads", "d_ff", "layers", "max_length"}` of our
            default preset.
        vocabulary_size: the SentencePiece vocabulary.
        eval_steps: evaluate (and save a checkpoint) every this many steps.
        venv: the OpenNMT-tf environment.
    """

    def __init__(self, directory, files, settings, model, vocabulary_size, eval_steps,
                 venv=DEFAULT_VENV):
        self.directory = os.path.abspath(directory)
        self.files = {split: tuple(map(os.path.abspath, pair)) for split, pair in files.items()}
        self.settings, self.model = settings, model
        self.vocabulary_size, self.eval_steps = vocabulary_size, eval_steps
        self.python = venv_python(venv)
        self.bin = os.path.dirname(self.python)
        self.model_dir = os.path.join(self.directory, "model")
        self.log = os.path.join(self.directory, "run.log")
        self.curve = os.path.join(self.directory, "evaluations.jsonl")
        os.makedirs(self.directory, exist_ok=True)

    def _run(self, argv):
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            log.flush()
            # Its own environment alone: nothing of this process's PYTHONPATH.
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            completed = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT,
                                       env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"))
        if completed.returncode:
            with open(self.log, encoding="utf-8") as log:
                tail = log.read()[-3000:]
            raise SystemExit(f"OpenNMT-tf failed ({' '.join(argv[:3])} ...):\n{tail}")

    def build_vocabulary(self):
        """One SentencePiece model and vocabulary for both sides, as `onmt-build-vocab --sentencepiece`.

        That command learns the model with pyonmttok's `SentencePieceLearner`
        (`keep_vocab=True`), then converts its vocabulary to OpenNMT-tf's
        format. In one process with TensorFlow 2.13 the learner crashes
        (a segmentation fault, here, 2026-12-07), so the two steps run in two:
        the learner without TensorFlow, then `onmt-build-vocab --from_vocab`.
        """
        prefix = os.path.join(self.directory, "sentencepiece")
        vocabulary = prefix + ".onmt.vocab"
        theirs = self.settings.get("tokenizer") not in (None, "own")
        if theirs and not os.path.isfile(vocabulary):
            # A model of ours: its pieces, as SentencePiece's .vocab lists them.
            import shutil

            import sentencepiece

            shutil.copyfile(self.settings["tokenizer"], prefix + ".model")
            processor = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
            with open(prefix + ".vocab", "w", encoding="utf-8", newline="\n") as file:
                file.write("".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i)}\n"
                                   for i in range(processor.get_piece_size())))
            self._run([os.path.join(self.bin, "onmt-build-vocab"), "--from_vocab",
                       prefix + ".vocab", "--from_format", "sentencepiece",
                       "--save_vocab", vocabulary])
        if not os.path.isfile(vocabulary):
            train_source, train_target = self.files["train"]
            learn = (
                "import sys, pyonmttok\n"
                "learner = pyonmttok.SentencePieceLearner(keep_vocab=True, "
                "vocab_size=int(sys.argv[1]), character_coverage=1.0)\n"
                "for path in sys.argv[3:]:\n"
                "    learner.ingest_file(path)\n"
                "learner.learn(sys.argv[2])\n"
            )
            self._run([self.python, "-c", learn, str(self.vocabulary_size), prefix,
                       train_source, train_target])
            self._run([os.path.join(self.bin, "onmt-build-vocab"), "--from_vocab",
                       prefix + ".vocab", "--from_format", "sentencepiece",
                       "--save_vocab", vocabulary])
        return prefix + ".model", vocabulary

    def write_config(self):
        """The model file and the YAML (as JSON) configuration; returns `(model_args, config)`."""
        sp_model, vocabulary = self.build_vocabulary()
        tokenization = {"type": "OpenNMTTokenizer",
                        "params": {"mode": "none", "sp_model_path": sp_model}}
        s = self.settings
        dropout = s.get("dropout", RECIPE["dropout"])
        if s.get("size") == "base":
            model_args = ["--model_type", "TransformerBase"]
            d_model = 512
        else:
            m = self.model
            model_file = os.path.join(self.directory, "model.py")
            with open(model_file, "w", encoding="utf-8") as file:
                file.write(
                    "import opennmt\n\n\ndef model():\n"
                    f"    return opennmt.models.Transformer(\n"
                    f"        num_layers={m['layers']}, num_units={m['d_model']}, "
                    f"num_heads={m['num_heads']}, ffn_inner_dim={m['d_ff']},\n"
                    f"        dropout={dropout}, attention_dropout={dropout}, "
                    f"ffn_dropout={dropout})\n"
                )
            model_args = ["--model", model_file]
            d_model = m["d_model"]
        warmup = s.get("warmup_steps", RECIPE["warmup_steps"])
        config = {
            "model_dir": self.model_dir,
            "data": {
                "train_features_file": self.files["train"][0],
                "train_labels_file": self.files["train"][1],
                "eval_features_file": self.files["valid"][0],
                "eval_labels_file": self.files["valid"][1],
                "source_vocabulary": vocabulary,
                "target_vocabulary": vocabulary,
                "source_tokenization": tokenization,
                "target_tokenization": tokenization,
            },
            "params": {
                "learning_rate": s.get("learning_rate", RECIPE["learning_rate"]),
                "decay_params": {"model_dim": d_model, "warmup_steps": warmup},
                # Ours' cap on a translation (the preset's max_target_length);
                # its own is 250, which an untrained model decodes in full.
                "maximum_decoding_length": self.model["max_length"],
            },
            "train": {
                "batch_size": s.get("batch_size", RECIPE["batch_size"]),
                "batch_type": "tokens",
                "effective_batch_size": s.get("effective_batch_size",
                                              RECIPE["effective_batch_size"]),
                "save_checkpoints_steps": self.eval_steps,
                "max_step": 10 ** 9,  # the budget ends the run
            },
            "eval": {"steps": self.eval_steps, "scorers": ["bleu", "chrf"]},
        }
        if s.get("size") == "base" and "dropout" in s:
            config["params"]["dropout"] = dropout
        path = os.path.join(self.directory, "config.yml")
        with open(path, "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2)  # JSON is YAML
        greedy = os.path.join(self.directory, "greedy.yml")
        with open(greedy, "w", encoding="utf-8") as file:
            json.dump({"params": {"beam_width": 1}}, file)
        return model_args, path

    def train(self, minutes):
        """Train for `minutes` of training time; the last checkpoints are averaged into model/avg."""
        model_args, config = self.write_config()
        if os.path.exists(self.curve):
            os.remove(self.curve)
        self._run([self.python, BUDGET_SCRIPT, str(minutes * 60), self.curve, *model_args,
                   "--config", config, "--auto_config", "train", "--with_eval"])
        return self.evaluations()

    def evaluations(self):
        """The evaluations during training: `[{"step", "seconds", "loss", "bleu", "chrf"}]`."""
        if not os.path.exists(self.curve):
            return []
        with open(self.curve, encoding="utf-8") as file:
            return [json.loads(line) for line in file if line.strip()]

    def epochs_by_step(self):
        """`[(step, epochs of the training pairs seen)]` at each of the trainer's log lines.

        Estimated from its logged rates (`source_tokens_by_step`) over the source
        pieces of one epoch (`epoch_source_tokens`, with the run's SentencePiece model).
        """
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(self.directory, "sentencepiece.model"))
        sources, targets = read_split_files({"train": self.files["train"]})["train"]
        per_epoch = epoch_source_tokens(sources, targets, processor.encode)
        with open(self.log, encoding="utf-8") as file:
            points = source_tokens_by_step(file.read())
        return [(step, tokens / per_epoch) for step, tokens in points]

    def average_up_to(self, step, max_count=8):
        """Average the kept checkpoints at or before `step` as auto_config averages its last ones.

        At most `max_count` of them (auto_config's `average_last_checkpoints`),
        into DIR/upto-STEP/avg; returns `(that path, [steps averaged])`.
        """
        chosen = checkpoints_up_to(self.model_dir, step, max_count)
        work = os.path.join(self.directory, f"upto-{step}")
        output = os.path.join(work, "avg")
        if not os.path.isdir(output):
            os.makedirs(work, exist_ok=True)
            for s in chosen:
                for path in glob.glob(os.path.join(self.model_dir, f"ckpt-{s}.*")):
                    link = os.path.join(work, os.path.basename(path))
                    if not os.path.lexists(link):
                        os.symlink(path, link)
            with open(os.path.join(work, "checkpoint"), "w", encoding="utf-8") as file:
                file.write(f'model_checkpoint_path: "ckpt-{chosen[-1]}"\n' + "".join(
                    f'all_model_checkpoint_paths: "ckpt-{s}"\n' for s in chosen))
            model_args, config = self.write_config()
            override = os.path.join(work, "model_dir.yml")
            with open(override, "w", encoding="utf-8") as file:
                json.dump({"model_dir": work}, file)
            self._run([os.path.join(self.bin, "onmt-main"), *model_args, "--config", config,
                       override, "--auto_config", "average_checkpoints", "--output_dir", output,
                       "--max_count", str(max_count)])
        return output, chosen

    def translate(self, sources_path, name, averaged=True, greedy=False, checkpoint=None,
                  length_penalty=None):
        """`onmt-main infer` of `sources_path`; the detokenized translations.

        From the averaged checkpoint (`averaged`), the last one, or `checkpoint`'s
        path. `length_penalty`: its beam search's α (GNMT's ((5 + len) / 6)^α, its
        only form), in place of its default 0 (the sum of log-probabilities).
        """
        model_args, config = self.write_config()
        configs = [config, os.path.join(self.directory, "greedy.yml")] if greedy else [config]
        if length_penalty is not None:
            configs.append(os.path.join(self.directory, f"length-penalty-{length_penalty:g}.yml"))
            with open(configs[-1], "w", encoding="utf-8") as file:
                json.dump({"params": {"length_penalty": length_penalty}}, file)
        if checkpoint is None:
            checkpoint = os.path.join(self.model_dir, "avg") if averaged else self.model_dir
        output = os.path.join(self.directory, f"{name}.hyp")
        self._run([os.path.join(self.bin, "onmt-main"), *model_args, "--config", *configs,
                   "--auto_config", "--checkpoint_path", checkpoint, "infer",
                   "--features_file", sources_path, "--predictions_file", output])
        with open(output, encoding="utf-8") as file:
            return file.read().split("\n")[:-1]


def main():
    """Write the Bible's splits for OpenNMT-tf: `python benchmarks/opennmt_peer.py DIR`."""
    from keras_tf.datasets import load_bible

    directory = sys.argv[1] if len(sys.argv) > 1 else "opennmt-data"
    bible = load_bible("fr")
    paths = write_split_files({split: getattr(bible, split) for split in SPLITS}, directory)
    for split, (sources, targets) in read_split_files(paths).items():
        print(f"{split}: {len(sources)} pairs, sha256 {pairs_digest(sources, targets)[:16]}")


if __name__ == "__main__":
    main()
