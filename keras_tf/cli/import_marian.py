"""Convert a Hugging Face Marian (OPUS-MT) model into a keras-tf model directory.

    keras-tf import-marian --model opus-mt-en-de --out en-de
    keras-tf import-marian --model hf://Helsinki-NLP/opus-mt-en-de --out en-de
    echo "Hello world" | keras-tf translate --model en-de

--model is a directory holding config.json (model_type "marian"),
model.safetensors, source.spm, target.spm, vocab.json and
tokenizer_config.json, or hf://ORG/NAME (needs huggingface_hub). --out is a
preset directory, as `keras-tf train --out` writes: translate, evaluate,
export, score and attention read it. docs/pretrained.md explains the
conversion and what was checked against Hugging Face's outputs. A non-empty
--out is refused unless --overwrite is given.
"""

from keras_tf.cli.targets import add_overwrite_argument


def add_arguments(parser):
    parser.add_argument(
        "--model", required=True, metavar="DIR",
        help="a Hugging Face Marian directory, or hf://ORG/NAME",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the preset directory to write")
    add_overwrite_argument(parser, "the imported model")


def run(args):
    from keras_tf.cli.outputs import write_folder
    from keras_tf.cli.targets import check_not_holding, check_target
    from keras_tf.translation import Seq2SeqTranslator

    if not args.model.startswith("hf://"):
        check_not_holding(args.out, "--out", {"--model": args.model})
    check_target(args.out, "--out", args.overwrite, "is not empty")
    translator = Seq2SeqTranslator.from_preset(args.model)
    write_folder(args.out, translator.save_to_preset)  # beside, then swapped in whole
    c = translator.config
    print(
        f"Wrote {args.out}: {c.num_encoder_layers}+{c.num_decoder_layers} layers, "
        f"d_model {c.d_model}, {c.target_vocabulary_size} ids, "
        f"decoding {translator.decoding.method} (beam size {translator.decoding.beam_size})"
    )
    return 0
