"""Translate files line for line with Apache Beam, locally or on a cluster.

    keras-tf translate-bulk --export models/translator/1 --input "mono/*.txt" --output translated
    keras-tf translate-bulk --export models/translator/1 --input "mono/*.txt" --output translated --direct_num_workers 2 --direct_running_mode multi_processing

Every input file gets an output file of the same name in --output, with
the same number of lines in the same order (an empty line gives an empty
line), whatever the runner and the number of workers. A line that cannot be
translated (not UTF-8, more subword pieces than the export's
max_source_length allows, or failing alone after its batch failed) gets an
empty output line and a line in --output/rejects.tsv: file, line number
and reason. The run ends with one summary line on stdout.

Outputs appear only when the run succeeds (they are staged and renamed
into place at the end); an existing non-empty output is kept unless
--overwrite. --pairs writes tab-separated pairs for `keras-tf train`
instead of translations alone.

Options this command does not know are Beam's pipeline options
(--runner, --direct_num_workers, --project, ...); without --runner the
pipeline runs in this process on Beam's FnApiRunner. Needs the beam
extra: pip install "keras-tf[beam]". docs/bulk.md shows Dataflow, Flink
and Spark runs.
"""

import logging
import sys

from keras_tf.cli.errors import UserError, int_in_range

BEAM_HINT = 'pip install "keras-tf[beam]"'


def add_arguments(parser):
    parser.add_argument("--export", required=True, metavar="DIR",
                        help="the export's version folder (local or gs://...), "
                        "e.g. models/translator/1 from keras-tf export")
    parser.add_argument("--input", required=True, metavar="GLOB",
                        help="the files to translate: a path or a quoted glob")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="where the outputs (same file names) and rejects.tsv go")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing non-empty outputs")
    parser.add_argument(
        "--pairs", nargs="?", const="source-translation",
        choices=("source-translation", "translation-source"),
        help="write `source<TAB>translation` lines (or translation-source: the order of "
        "back-translation, synthetic source first) for keras-tf train; default: none, "
        "translations only",
    )
    parser.add_argument("--batch-size", metavar="N", type=int_in_range(1), default=64,
                        help="lines per batch; default: 64")
    parser.add_argument("--batch-chars", metavar="N", type=int_in_range(1), default=16384,
                        help="characters per batch; default: 16384")
    parser.add_argument("--lines-per-part", metavar="N", type=int_in_range(1), default=10000,
                        help="lines a worker puts back in order at a time; default: 10000")
    parser.add_argument(
        "--model-copies", metavar="N", type=int_in_range(1),
        help="copies of the model per machine, shared by its worker processes "
        "(default: one per worker process)",
    )
    # Beam's pipeline options, which this parser does not know, arrive here.
    parser.set_defaults(unknown_options=[])


def run(args):
    from keras_tf.tensorflow_import import tensorflow_notices_dropped

    _beam_errors_only()
    try:
        import apache_beam  # noqa: F401
    except ModuleNotFoundError as error:
        if error.name != "apache_beam":
            raise
        raise UserError(f"translate-bulk needs Apache Beam: {BEAM_HINT}") from None
    from keras_tf.bulk import BulkOptions, translate_files

    with tensorflow_notices_dropped():
        summary = translate_files(BulkOptions(
            export_dir=args.export, input_pattern=args.input, output_dir=args.output,
            overwrite=args.overwrite, pairs=args.pairs, max_batch_size=args.batch_size,
            max_batch_chars=args.batch_chars, lines_per_part=args.lines_per_part,
            model_copies=args.model_copies, pipeline_args=tuple(args.unknown_options),
        ))
    print(f"translate-bulk: {summary.line()}")
    return 0


def _beam_errors_only():
    """Show Beam's errors, not its notices: it logs to the root logger ("apitools not found")."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.ERROR)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        root.addHandler(handler)
