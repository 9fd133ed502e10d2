"""Your own SentencePiece model: ids in its own order, no reserved pieces, through fit, presets and the export."""

import io

import keras
import numpy as np
import sentencepiece
import tensorflow as tf

from keras_tf.decoding import DecodingConfig
from keras_tf.text import Seq2SeqTokenizers
from keras_tf.translation import Seq2SeqTranslator
from tests.serving.conftest import sentences


def sentencepiece_model(texts, size):
    """A SentencePiece model trained with its own defaults: <unk> 0, <s> 1, </s> 2, no <pad>."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=size, minloglevel=2
    )
    return model.getvalue()


def test_an_external_sentencepiece_model_trains_saves_reloads_and_exports(tmp_path):
    sources = sentences(300, seed=0)
    targets = [" ".join(reversed(s.split())) for s in sources]
    source_model = sentencepiece_model(sources, 60)
    target_model = sentencepiece_model(targets, 60)
    (tmp_path / "source.model").write_bytes(source_model)

    tokenizers = Seq2SeqTokenizers.from_sentencepiece(tmp_path / "source.model", target_model)
    # Its own numbering is not ours: the mapping puts its pieces after our four.
    own = sentencepiece.SentencePieceProcessor(model_proto=source_model)
    assert [own.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]
    text = sources[0]
    ours = tokenizers.tokenize_source([text]).to_list()[0]
    assert [tokenizers.source_tokenizer.vocabulary[i] for i in ours] == own.encode(text, out_type=str)
    assert min(ours) >= 4

    keras.utils.set_random_seed(1)
    translator = Seq2SeqTranslator.from_preset(
        "transformer_tiny", tokenizers=tokenizers, decoding=DecodingConfig(max_length=12),
        num_encoder_layers=1, num_decoder_layers=1, max_source_length=64, max_target_length=64,
    )
    translator.compile(optimizer=keras.optimizers.Adam(3e-3), jit_compile=False)
    history = translator.fit(sources, targets, batch_size=32, epochs=2, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]

    translator.save_to_preset(tmp_path / "preset")
    reloaded = Seq2SeqTranslator.from_preset(tmp_path / "preset")
    texts = sentences(6, seed=5) + [""]
    expected = translator.generate(texts)
    assert reloaded.generate(texts) == expected
    assert expected[-1] == ""

    export_dir = reloaded.export(str(tmp_path / "export"))
    served = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(texts))
    assert [t.decode() for t in served["translation"].numpy()] == expected
    np.testing.assert_allclose(
        served["score"].numpy(), reloaded.generate_with_scores(texts).scores, atol=1e-4
    )
