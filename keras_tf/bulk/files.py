"""Translate files line for line with Beam: each output in its input's order, atomically.

The job, in its steps (`translate_files`):

1. `plan_outputs`: list the inputs, name an output for each, refuse an
   existing non-empty output unless `overwrite`.
2. `run_pipeline`: one Beam pipeline reads each file as bytes, keys every
   line by (file, line number), reshuffles them over the workers,
   translates them (`TranslateLines`), and puts each line back in its
   part: lines `[p * lines_per_part, (p + 1) * lines_per_part)` of a file
   are grouped on one worker, sorted, and written as one part file of a
   staging folder beside the outputs. A worker holds at most one part,
   never a whole file.
3. `assemble`: concatenate each file's parts in order, check that every
   line came back, and rename the outputs and the rejects file into place.
   A failed run leaves the outputs as they were and removes its staging
   folder.

Paths are local or any `tf.io.gfile` URI (`gs://...`).
"""

import dataclasses
import os
import uuid

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from keras_tf.bulk.handler import TranslationModelHandler
from keras_tf.bulk.transform import TranslateLines
from keras_tf.option_error import OptionError
from keras_tf.serving.export import read_export_config

REJECTS_FILENAME = "rejects.tsv"
PAIR_ORDERS = ("source-translation", "translation-source")


@dataclasses.dataclass(frozen=True)
class BulkOptions:
    """What `translate_files` does, checked once.

    Args:
        export_dir: the export's version folder, local or a `tf.io.gfile` URI.
        input_pattern: a file or glob of input files (`tf.io.gfile.glob`).
        output_dir: where the outputs go, one per input file, same base name.
        overwrite: replace existing non-empty outputs. Defaults to False.
        pairs: None (default): translations only; "source-translation" or
            "translation-source": tab-separated pairs, the order a
            `keras-tf train` corpus needs.
        max_batch_size: lines per batch. Defaults to 64.
        max_batch_chars: characters per batch. Defaults to 16384.
        lines_per_part: lines a worker puts back in order at a time.
            Defaults to 10000.
        model_copies: copies of the model per machine, shared by its worker
            processes. Defaults to None: one per worker process.
        pipeline_args: Beam pipeline options, e.g. `["--runner=DataflowRunner"]`.
            Without `--runner`: FnApiRunner, in this process.
    """

    export_dir: str
    input_pattern: str
    output_dir: str
    overwrite: bool = False
    pairs: str = None
    max_batch_size: int = 64
    max_batch_chars: int = 16384
    lines_per_part: int = 10000
    model_copies: int = None
    pipeline_args: tuple = ()

    def __post_init__(self):
        if self.pairs is not None and self.pairs not in PAIR_ORDERS:
            raise OptionError([("pairs", self.pairs)], f"must be None or one of {PAIR_ORDERS}")
        for name in ("max_batch_size", "max_batch_chars", "lines_per_part", "model_copies"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise OptionError([(name, value)], "must be an integer >= 1")


@dataclasses.dataclass(frozen=True)
class Plan:
    """The inputs, their outputs, and the staging folder of one run."""

    inputs: tuple
    outputs: tuple
    rejects: str
    staging: str


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a run did: `lines == translated + rejected`."""

    files: int
    lines: int
    translated: int
    rejected: int
    rejects: str

    def line(self):
        files = f"{self.files} file" + ("" if self.files == 1 else "s")
        return (f"{files}, {self.lines} lines in = {self.translated} translated "
                f"+ {self.rejected} rejected (rejects: {self.rejects})")


def translate_files(options):
    """Translate every file of `options.input_pattern`; return a `Summary`.

    Example:
        >>> summary = translate_files(BulkOptions(  # doctest: +SKIP
        ...     "models/translator/1", "mono/*.txt", "translated"))
        >>> print(summary.line())  # doctest: +SKIP
        2 files, 20 lines in = 19 translated + 1 rejected (rejects: translated/rejects.tsv)
    """
    check_export(options.export_dir)
    plan = plan_outputs(options)
    gfile = tf.io.gfile
    try:
        run_pipeline(options, plan)
        return assemble(options, plan)
    finally:
        if gfile.exists(plan.staging):
            gfile.rmtree(plan.staging)


def check_export(export_dir):
    """Raise FileNotFoundError unless `export_dir` holds a keras_tf export (one line)."""
    if not tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
        raise FileNotFoundError(
            f"no saved_model.pb in {export_dir}; give the export's version folder, e.g. "
            "models/translator/1"
        )
    read_export_config(export_dir)


def plan_outputs(options):
    """The `Plan` of `options`; ValueError or FileExistsError (one line) when it cannot run."""
    gfile = tf.io.gfile
    inputs = tuple(sorted(path for path in gfile.glob(options.input_pattern)
                          if not gfile.isdir(path)))
    if not inputs:
        raise FileNotFoundError(f"no file matches {options.input_pattern}")
    names = {}
    for path in inputs:
        name = os.path.basename(path)
        if name in names:
            raise ValueError(f"two inputs would write {name}: {names[name]} and {path}")
        if name == REJECTS_FILENAME:
            raise ValueError(f"an input is named {REJECTS_FILENAME}, the rejects file's name: {path}")
        names[name] = path
    outputs = tuple(os.path.join(options.output_dir, os.path.basename(p)) for p in inputs)
    rejects = os.path.join(options.output_dir, REJECTS_FILENAME)
    if not options.overwrite:
        for path in (*outputs, rejects):
            if gfile.exists(path) and gfile.stat(path).length > 0:
                raise FileExistsError(
                    f"{path} exists and is not empty; overwrite=True (--overwrite) replaces it"
                )
    for source, output in zip(inputs, outputs):
        if os.path.abspath(source) == os.path.abspath(output):
            raise ValueError(f"the output would replace its input: {source}")
    staging = os.path.join(options.output_dir, f".translate-bulk-{uuid.uuid4().hex}")
    return Plan(inputs, outputs, rejects, staging)


def _part_path(staging, file_index, part, kind):
    return os.path.join(staging, f"{file_index:06d}", f"{part:09d}.{kind}")


def _lines_path(staging, file_index):
    return os.path.join(staging, f"{file_index:06d}", "lines")


def _write_atomically(path, data):
    """Write bytes: a retried bundle rewrites the same file whole, never half."""
    gfile = tf.io.gfile
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    with gfile.GFile(temporary, "wb") as file:
        file.write(data)
    gfile.rename(temporary, path, overwrite=True)


class _ReadLines(beam.DoFn):
    """(index, path) -> ((path, line number from 1), line bytes without its line end).

    Lines end at b"\\n" (a b"\\r\\n" end is dropped whole; a lone CR stays
    in its line); a last line without an end is a line. Writes the file's
    line count to the staging folder, for `assemble`'s check.
    """

    def __init__(self, staging):
        self._staging = staging

    def process(self, element):
        index, path = element
        gfile = tf.io.gfile
        gfile.makedirs(os.path.dirname(_lines_path(self._staging, index)))
        count = 0
        with gfile.GFile(path, "rb") as file:
            for count, line in enumerate(iter(file.readline, b""), start=1):
                line = line[:-1] if line.endswith(b"\n") else line
                line = line[:-1] if line.endswith(b"\r") else line
                yield (path, count), line
        _write_atomically(_lines_path(self._staging, index), str(count).encode())


def output_line(source, translation, pairs):
    """The output line of a translated line (without its end): no tab or line break inside."""
    translation = " ".join(translation.replace("\t", " ").splitlines())
    if pairs == "source-translation":
        return f"{source}\t{translation}"
    if pairs == "translation-source":
        return f"{translation}\t{source}"
    return translation


class _WritePart(beam.DoFn):
    """((path, part), [(line, result)]) -> a part's output and rejects files in the staging folder."""

    def __init__(self, staging, file_indices, pairs):
        self._staging = staging
        self._file_indices = file_indices
        self._pairs = pairs

    def process(self, element):
        (path, part), lines = element
        out, rejects = [], []
        for line_number, (source, translation, reject) in sorted(lines):
            if reject is None and self._pairs and "\t" in source:
                reject = "the source holds a tab: no tab-separated pair can hold it"
            if reject is None:
                out.append(output_line(source, translation, self._pairs) + "\n")
            else:
                out.append("\n")
                rejects.append(f"{path}\t{line_number}\t{reject}\n")
        index = self._file_indices[path]
        _write_atomically(_part_path(self._staging, index, part, "out"),
                          "".join(out).encode("utf-8"))
        _write_atomically(_part_path(self._staging, index, part, "rejects"),
                          "".join(rejects).encode("utf-8"))


def pipeline_options(pipeline_args):
    """Beam's PipelineOptions of `pipeline_args`, FnApiRunner unless a `--runner` is given."""
    args = list(pipeline_args)
    if not any(arg == "--runner" or arg.startswith("--runner=") for arg in args):
        args.append("--runner=FnApiRunner")
    return PipelineOptions(args)


def run_pipeline(options, plan):
    """Translate the plan's inputs into part files under `plan.staging`."""
    handler = TranslationModelHandler(
        options.export_dir, max_batch_size=options.max_batch_size,
        max_batch_chars=options.max_batch_chars, model_copies=options.model_copies,
    )
    lines_per_part = options.lines_per_part
    file_indices = {path: index for index, path in enumerate(plan.inputs)}
    with beam.Pipeline(options=pipeline_options(options.pipeline_args)) as pipeline:
        _ = (
            pipeline
            | "Files" >> beam.Create(list(enumerate(plan.inputs)))
            | "Read" >> beam.ParDo(_ReadLines(plan.staging))
            # Else fusion keeps a whole file's lines on the worker that read it.
            | "Spread" >> beam.Reshuffle()
            | "Translate" >> TranslateLines(handler)
            | "ByPart" >> beam.Map(
                lambda item: ((item[0][0], (item[0][1] - 1) // lines_per_part),
                              (item[0][1], item[1])))
            | "GroupParts" >> beam.GroupByKey()
            | "WriteParts" >> beam.ParDo(_WritePart(plan.staging, file_indices, options.pairs))
        )


def assemble(options, plan):
    """Concatenate the parts of each input in order, check the counts, move everything into place."""
    gfile = tf.io.gfile
    gfile.makedirs(options.output_dir)
    moves = []
    lines = rejected = 0
    rejects_temporary = os.path.join(plan.staging, "all." + REJECTS_FILENAME)
    with gfile.GFile(rejects_temporary, "wb") as rejects_file:
        rejects_file.write(b"")  # GFile creates a file at its first write: an empty one too
        for index, (source, output) in enumerate(zip(plan.inputs, plan.outputs)):
            expected = int(gfile.GFile(_lines_path(plan.staging, index), "rb").read())
            temporary = os.path.join(plan.staging, f"{index:06d}.out")
            written = 0
            with gfile.GFile(temporary, "wb") as out:
                out.write(b"")  # an empty input's output
                for part in range(-(-expected // options.lines_per_part)):
                    data = gfile.GFile(_part_path(plan.staging, index, part, "out"), "rb").read()
                    written += data.count(b"\n")
                    out.write(data)
                    data = gfile.GFile(_part_path(plan.staging, index, part, "rejects"),
                                       "rb").read()
                    rejected += data.count(b"\n")
                    rejects_file.write(data)
            if written != expected:
                raise RuntimeError(
                    f"{source}: {expected} lines read but {written} written; no output replaced"
                )
            lines += expected
            moves.append((temporary, output))
    moves.append((rejects_temporary, plan.rejects))
    for temporary, output in moves:
        gfile.rename(temporary, output, overwrite=True)
    return Summary(len(plan.inputs), lines, lines - rejected, rejected, plan.rejects)
