"""Seq2SeqTranslator: fit on strings, generate strings and ids, score, presets, four paths, errors."""

import pathlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

from keras_tf.decoding import DecodingConfig
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.translation import Seq2SeqTranslator, presets
from keras_tf.models.config import END_ID, PAD_ID
from keras_tf.text import Seq2SeqPreprocessor, Seq2SeqTokenizers
from tests.cli.conftest import generated_pairs  # word-by-word English -> French
from tests.helpers import BatchesPerEpoch, build_once, shared_folder
MAX_LENGTH = 16
BEAM = DecodingConfig(method="beam", beam_size=4)
TEXTS = ["red cat", "open the file", "two small dogs", "", "save"]


def make_pairs(count, seed):
    """`(sources, targets)`: lists of generated word-by-word pairs."""
    pairs = generated_pairs(count, seed)
    return [s for s, _ in pairs], [t for _, t in pairs]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A one-block transformer_tiny translator fitted on strings, with no warning raised.

    Fitted once per test run: the first pytest-xdist worker to get here fits
    and saves it as a preset; each worker's tests use the reloaded preset.
    One block: the word-by-word lexicon needs no depth, and every program
    the module's tests compile traces half the blocks. Over seeds 7 to 10 it
    decoded 0.70, 0.68, 0.83 and 0.68 of the held-out sentences exactly
    (two blocks: 0.78, 0.83, 0.58, 0.68), in 14 to 17 s of CPU for the fit
    against 22 to 25 s (the Zen 1 VM, 2026-12-05).
    """

    def fit(folder):
        keras.utils.set_random_seed(7)
        sources, targets = make_pairs(256, seed=0)
        tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=48)
        translator = Seq2SeqTranslator.from_preset(
            "transformer_tiny", tokenizers=tokenizers, decoding=BEAM,
            max_source_length=MAX_LENGTH, max_target_length=MAX_LENGTH,
            num_encoder_layers=1, num_decoder_layers=1,
        )
        # The default Adam(5e-4) suits transformer_small and up; this 32-wide
        # model learns faster at a higher rate. Without XLA: its compile costs
        # more than 192 steps of this model gain (benchmarks/xla_short_run.py).
        translator.compile(optimizer=keras.optimizers.Adam(3e-3, beta_2=0.98, epsilon=1e-9),
                           jit_compile=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            history = translator.fit(sources, targets, batch_size=32, epochs=24, seed=0,
                                     verbose=0)
            held_out = make_pairs(40, seed=1)
            hypotheses = translator.generate(held_out[0])
        translator.save_to_preset(str(folder / "translator"))
        # The preset the tests share translates as the fitted translator did.
        reloaded = Seq2SeqTranslator.from_preset(str(folder / "translator"))
        assert reloaded.generate(held_out[0]) == hypotheses
        with open(folder / "fit.json", "w") as file:
            json.dump({"history": history.history, "held_out": held_out,
                       "hypotheses": hypotheses}, file)

    folder = build_once(shared_folder(tmp_path_factory, "fitted_translator"), fit)
    with open(folder / "fit.json") as file:
        fitted = json.load(file)
    directory = str(folder / "translator")
    return {"translator": Seq2SeqTranslator.from_preset(directory), "directory": directory,
            **fitted}


def test_fit_on_strings_learns_the_lexicon(trained):
    loss = trained["history"]["loss"]
    assert loss[-1] < 0.5 * loss[0], loss
    _, references = trained["held_out"]
    exact = np.mean([h == r for h, r in zip(trained["hypotheses"], references)])
    assert exact >= 0.6, list(zip(trained["hypotheses"], references))


def test_generate_on_ids_gives_the_ids_of_the_strings(trained):
    translator = trained["translator"]
    preprocessor = translator.preprocessor
    import tensorflow as tf

    sources = trained["held_out"][0][:8]
    encoder_tokens = preprocessor.encoder_tokens(preprocessor.source_ids(tf.constant(sources)))
    ids = translator.generate(encoder_tokens.numpy())
    assert ids.dtype == np.int32 and ids.shape == (8, MAX_LENGTH)
    strings = [s.decode() for s in preprocessor.detokenize(tf.constant(ids)).numpy()]
    assert strings == translator.generate(sources)
    # A single string in, a single string out.
    assert translator.generate(sources[0]) == strings[0]


def test_decoding_fields_override_per_call(trained):
    translator = trained["translator"]
    sources = trained["held_out"][0][:6]
    greedy = translator.generate(sources, method="greedy")
    assert greedy == translator.generate(sources, decoding=DecodingConfig())
    # beam 1 is greedy search, whatever the length penalty
    assert greedy == translator.generate(sources, beam_size=1, length_penalty=2.0)
    cut = translator.generate_with_scores(sources, max_length=2)
    assert all(len(t.split()) <= 2 for t in cut.texts)


def test_generate_in_a_loop_traces_its_text_graphs_once_and_logs_nothing(trained):
    """The preprocessor keeps its framing graph: traced once per source length, not per call.

    Traced anew at every call, the tf.functions cost 0.33 s a call for one
    short sentence against 0.008 s kept (Zen 1 VM), and from the sixth call
    TensorFlow logged a retracing warning.
    """
    import logging

    import tensorflow as tf

    translator = trained["translator"]
    sources = trained["held_out"][0][:7]
    logged = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    try:
        # Seven calls, each with a new sentence: one decoding program to compile.
        outputs = [translator.generate(sources[n : n + 1]) for n in range(7)]
        # Another setting reuses the framing graph (same source length).
        translator.generate(sources[:1], method="greedy")
    finally:
        tf.get_logger().removeHandler(handler)
    assert logged == []
    limit = translator.resolve_decoding().max_source_length
    graph = translator.preprocessor._generation_graphs[limit]
    assert graph.experimental_get_tracing_count() == 1
    # A new translator of the same parts gives the same strings.
    fresh = Seq2SeqTranslator(translator.backbone, translator.preprocessor, translator.decoding)
    assert sum(outputs, []) == [fresh.generate([source])[0] for source in sources]


def test_every_decoding_method_works_on_strings(trained):
    """Greedy, beam, top-k and top-p on strings: one path, the translator's own preprocessor."""
    translator = trained["translator"]
    sources = trained["held_out"][0][:6]
    greedy = translator.generate(sources, method="greedy")
    ids = translator.preprocessor.encoder_tokens(
        translator.preprocessor.source_ids(np.array(sources, dtype=object))
    ).numpy()
    # The strings are the detokenized ids generate gives for the same sources.
    greedy_ids = translator.generate(ids, method="greedy")
    assert greedy == [
        s.decode() for s in translator.preprocessor.detokenize(greedy_ids).numpy()
    ]
    beam = translator.generate(sources, method="beam", beam_size=4)
    assert len(beam) == len(sources) and all(isinstance(t, str) for t in beam)
    # Sampling: the same seed gives the same strings; top-k of 1 is greedy.
    for fields in ({"method": "top_k", "top_k": 5}, {"method": "top_p", "top_p": 0.9}):
        first = translator.generate(sources, seed=11, temperature=1.5, **fields)
        assert first == translator.generate(sources, seed=11, temperature=1.5, **fields)
        others = [translator.generate(sources, seed=seed, temperature=1.5, **fields)
                  for seed in (12, 13, 14)]
        assert any(other != first for other in others)  # the seed matters
    assert translator.generate(sources, method="top_k", top_k=1, seed=3) == greedy


def test_arrays_tensors_and_datasets_of_strings_are_text(trained):
    import tensorflow as tf

    translator = trained["translator"]
    sources, targets = make_pairs(5, seed=3)
    as_list = translator.generate(sources)
    for texts in (np.array(sources), np.array(sources, dtype=object), tf.constant(sources),
                  tf.data.Dataset.from_tensor_slices(sources),            # 32 a batch
                  tf.data.Dataset.from_tensor_slices(sources).batch(2)):  # 2, 2 and 1
        assert translator.generate(texts) == as_list, texts
    assert translator.generate(tf.constant(sources[0])) == as_list[0]
    assert translator.generate_with_scores(tf.constant(sources)).texts == as_list
    np.testing.assert_array_equal(
        translator.score(tf.constant(sources), np.array(targets)), translator.score(sources, targets)
    )
    with pytest.raises(TypeError, match="generate takes a tf.data of strings .*int32"):
        translator.generate(tf.data.Dataset.from_tensor_slices(np.ones([2, 3], "int32")))


def test_sources_cut_to_fit_are_counted_in_a_warning(trained):
    """Past max_source_length - 1 pieces a source is cut, as the export cuts it, and said so."""
    import tensorflow as tf

    translator = trained["translator"]
    # Prefixes of one long sentence, a word longer each: find the longest
    # that fits (15 pieces and END) and the shortest that does not.
    words = " ".join(trained["held_out"][0]).split()
    prefixes = [" ".join(words[:n]) for n in range(1, len(words) + 1)]
    pieces = [len(ids) for ids in translator.preprocessor.source_ids(tf.constant(prefixes)).to_list()]
    fits = max(p for p, n in zip(prefixes, pieces) if n <= MAX_LENGTH - 1)
    cut = min((p for p, n in zip(prefixes, pieces) if n > MAX_LENGTH - 1), key=len)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        translator.generate([fits, "save"])  # no warning
    message = (f"1 of 3 sources are longer than max_source_length={MAX_LENGTH} "
               rf"\(END included\) allows and were translated from their first {MAX_LENGTH - 1} ")
    with pytest.warns(UserWarning, match=message):
        translations = translator.generate([fits, cut, "save"])
    assert len(translations) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the result names them: no warning
        assert translator.generate_with_scores([fits, cut, "save"]).overlong == [1]
    with pytest.warns(UserWarning, match="2 of 4 sources"):  # over batches of 3 and 1
        translator.generate(tf.data.Dataset.from_tensor_slices([cut, "save", cut, fits]).batch(3))


def test_text_pairs_that_do_not_pair_get_a_clear_error(trained):
    translator = trained["translator"]
    sources, targets = make_pairs(3, seed=4)
    with pytest.raises(ValueError, match="one target per source; received 3 sources and 2"):
        translator.score(sources, targets[:2])
    with pytest.raises(ValueError, match="one target per source; received 3 sources and 1"):
        translator.fit(sources, targets[:1], epochs=1, verbose=0)
    with pytest.raises(ValueError, match="y must be strings to pair with the strings of x and y; "
                       "received None"):
        translator.fit(sources, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="targets must be strings .* received ndarray"):
        translator.score(sources, np.zeros([3, 4], "int32"))
    # A single pair is one pair; no pairs score as an empty array.
    np.testing.assert_array_equal(translator.score(sources[0], targets[0]),
                                  translator.score(sources[:1], targets[:1]))
    empty = translator.score([], [])
    assert empty.shape == (0,) and empty.dtype == np.float32


@pytest.mark.parametrize("items, message", [
    ([123], "[0] is int, not a string"),
    ([None], "[0] is NoneType, not a string"),
    (["a", 5], "[1] is int, not a string"),
    ([["a"]], "[0] is a list of strings: pass one string per item"),
])
def test_an_item_that_is_not_a_string_is_named(trained, items, message):
    translator = trained["translator"]
    with pytest.raises(TypeError, match=r"^inputs" + re.escape(message)):
        translator.generate(items)
    with pytest.raises(TypeError, match=r"^texts" + re.escape(message)):
        translator.n_best(items, 1, method="beam", beam_size=2)
    with pytest.raises(TypeError, match=r"^sources" + re.escape(message)):
        translator.score(items, ["x"] * len(items))
    with pytest.raises(TypeError, match=r"^targets" + re.escape(message)):
        translator.score(["x"] * len(items), items)


def test_score_is_the_sum_of_teacher_forced_log_softmax(trained):
    translator = trained["translator"]
    sources, targets = make_pairs(6, seed=2)
    scores = translator.score(sources, targets)
    import tensorflow as tf

    inputs, labels = translator.preprocessor(tf.constant(sources), tf.constant(targets))
    logits = keras.ops.convert_to_numpy(translator.backbone(inputs)).astype("float64")
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    labels = labels.numpy()
    expected = [
        sum(log_probs[b, t, labels[b, t]] for t in range(labels.shape[1]) if labels[b, t] != PAD_ID)
        for b in range(len(sources))
    ]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    # Each label row ends with END: the score counts it.
    assert all(END_ID in row for row in labels)
    # A wrong translation scores lower than the right one.
    wrong = translator.score(sources, [t + " rouge rouge" for t in targets])
    assert np.all(wrong < scores)


def test_greedy_score_equals_the_score_of_its_own_output(trained):
    translator = trained["translator"]
    sources = trained["held_out"][0][:6]
    greedy = translator.generate_with_scores(sources, method="greedy")
    np.testing.assert_allclose(
        translator.score(sources, greedy.texts), greedy.scores, rtol=1e-4, atol=1e-4
    )


def test_fit_takes_a_dataset_of_string_pairs_and_token_ids(trained):
    import tensorflow as tf

    # A copy: the shared translator stays as its preset was saved. fit's
    # defaults but XLA, whose compile these 9 short epochs would not pay back
    # (test_evaluate_takes_strings... checks the default).
    translator = Seq2SeqTranslator.from_preset(trained["directory"])
    translator.compile(jit_compile=False)
    sources, targets = make_pairs(64, seed=3)
    before = translator.score(sources, targets).sum()
    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))  # unbatched pairs
    valid = make_pairs(24, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history = translator.fit(dataset, epochs=1, verbose=0, validation_data=valid)
    assert len(history.history["loss"]) == 1
    # Validation on strings is evaluate on the same strings, after the epoch.
    assert history.history["val_loss"][0] == pytest.approx(
        translator.evaluate(*valid, verbose=0, return_dict=True)["loss"], rel=1e-5
    )
    # A list of pairs: one pass an epoch (2 batches of 32), read through one
    # iterator for the run; validation reads one pass of its pairs each time.
    counts = BatchesPerEpoch()
    history = translator.fit(sources, targets, epochs=2, verbose=0, validation_data=valid,
                             callbacks=[counts], seed=1)
    assert counts.batches == [2, 2]
    assert history.history["val_loss"][1] == pytest.approx(
        translator.evaluate(*valid, verbose=0, return_dict=True)["loss"], rel=1e-5
    )
    inputs, labels = translator.preprocessor.bucketed(
        *translator.preprocessor(tf.constant(sources), tf.constant(targets))
    )
    ids = {k: v.numpy() for k, v in inputs.items()}
    history = translator.fit(ids, labels.numpy(), batch_size=32, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # Four epochs on these pairs: they are likelier than before.
    assert translator.score(sources, targets).sum() > before


def test_a_list_of_pairs_is_one_pass_an_epoch_reshuffled_each_pass(trained):
    import tensorflow as tf

    translator = trained["translator"]
    sources, targets = make_pairs(40, seed=4)
    dataset, _, _, batches = translator._as_dataset(sources, targets, 16, True, 0, repeat=True)
    assert batches == 3  # 16, 16 and 8 pairs

    def rows(inputs):
        return [tuple(np.trim_zeros(row, "b")) for row in np.asarray(inputs["encoder_tokens"])]

    expected = sorted(rows(translator.preprocessor(tf.constant(sources), tf.constant(targets))[0]))
    passes = [[], [], []]
    for index, (inputs, labels) in enumerate(dataset.take(3 * batches)):
        # The short batch is filled to 16 rows with rows of padding alone
        # (one shape, one XLA program), which the loss does not count.
        assert labels.shape[0] == 16 and inputs["encoder_tokens"].shape[0] == 16
        fill = ~np.asarray(labels).any(1)
        assert fill.sum() == (8 if index % batches == 2 else 0)
        assert not np.asarray(inputs["decoder_tokens"])[fill].any()
        passes[index // batches] += [row for row in rows(inputs) if row]
    for rows_of_pass in passes:
        assert sorted(rows_of_pass) == expected  # every pair once, none from the next pass
    assert passes[0] != passes[1] != passes[2]  # reshuffled each pass


def test_evaluate_takes_strings_as_fit_does_and_predict_says_what_takes_them(trained):
    import tensorflow as tf

    translator = Seq2SeqTranslator.from_preset(trained["directory"])  # evaluate compiles it
    sources, targets = make_pairs(40, seed=6)
    # In batches of 16, 16 and 8 (filled with 8 rows of padding) against one
    # batch of 40: the loss is a mean over target tokens, so batching moves nothing.
    on_text = translator.evaluate(sources, targets, batch_size=16, verbose=0, return_dict=True)
    inputs, labels = translator.preprocessor.bucketed(
        *translator.preprocessor(tf.constant(sources), tf.constant(targets))
    )
    ids = {key: value.numpy() for key, value in inputs.items()}
    on_ids = translator.evaluate(ids, labels.numpy(), batch_size=40, verbose=0, return_dict=True)
    assert set(on_text) == {"loss", "masked_accuracy"}
    assert translator.jit_compile is True  # fit's defaults: XLA, whatever Keras's "auto" says
    for key in on_text:
        assert on_text[key] == pytest.approx(on_ids[key], rel=1e-5), key
    # The fitted translator knows these pairs: far below a uniform guess over 48 ids.
    assert on_text["loss"] < 0.5 * np.log(48)
    for strings in (sources, tf.data.Dataset.from_tensor_slices(sources).batch(8)):
        with pytest.raises(ValueError, match=r"use generate\(sources\) to translate or score"):
            translator.predict(strings)
    logits = translator.predict(ids, verbose=0)
    assert logits.shape == (*labels.shape, translator.config.target_vocabulary_size)


def test_from_preset_name_builds_the_untrained_architecture():
    tokenizers = Seq2SeqTokenizers.train(*make_pairs(64, seed=4), vocabulary_size=40)
    translator = Seq2SeqTranslator.from_preset("transformer_small", tokenizers=tokenizers)
    assert translator.config == get_preset(
        "transformer_small", source_vocabulary_size=40, target_vocabulary_size=40
    )
    ids_only = Seq2SeqTranslator.from_preset("transformer_tiny", d_model=64)
    assert ids_only.preprocessor is None and ids_only.config.d_model == 64
    out = ids_only.generate(np.array([[5, 6, 7, END_ID]]), max_length=5)
    assert out.shape == (1, 5)
    with pytest.raises(ValueError, match="cannot read text"):
        ids_only.generate(["red cat"])


def test_save_to_preset_round_trip_gives_equal_outputs(trained, tmp_path):
    translator = trained["translator"]
    directory = str(tmp_path / "preset")  # a copy: the workers share trained["directory"]
    shutil.copytree(trained["directory"], directory)
    reloaded = Seq2SeqTranslator.from_preset(directory)
    assert reloaded.config == translator.config
    assert reloaded.decoding == translator.decoding
    sources, targets = make_pairs(8, seed=5)
    np.testing.assert_array_equal(reloaded.score(sources, targets), translator.score(sources, targets))
    assert reloaded.generate(sources) == translator.generate(sources)
    # Saving again over a preset replaces it whole.
    reloaded.save_to_preset(directory)
    assert sorted(os.listdir(directory)) == [
        "config.json", "decoding.json", "metadata.json", "model.keras", "tokenizers"
    ]


def test_each_part_loads_from_the_preset_alone(trained, tmp_path):
    """keras-hub's shape: the model, the preprocessor and the tokenizers each load alone."""
    import tensorflow as tf

    translator, directory = trained["translator"], trained["directory"]
    model = presets.load_backbone(directory)
    assert model.config == translator.config
    for ours, theirs in zip(model.get_weights(), translator.backbone.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    fresh = presets.load_backbone(directory, load_weights=False)
    assert fresh.config == translator.config
    assert not np.array_equal(fresh.get_weights()[0], model.get_weights()[0])

    preprocessor = presets.load_preprocessor(directory)
    lengths = (preprocessor.max_source_length, preprocessor.max_target_length)
    assert lengths == (translator.config.max_source_length, translator.config.max_target_length)
    sources, targets = make_pairs(6, seed=9)
    ours, theirs = (p(tf.constant(sources), tf.constant(targets))
                    for p in (preprocessor, translator.preprocessor))
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs)):
        np.testing.assert_array_equal(a, b)
    tokenizers = presets.load_tokenizers(directory)
    assert tokenizers.get_config() == translator.preprocessor.tokenizers.get_config()
    assert presets.load_decoding(directory) == translator.decoding

    named = presets.load_backbone("transformer_tiny", num_decoder_layers=1)
    assert named.config == get_preset("transformer_tiny", num_decoder_layers=1)
    with pytest.raises(ValueError, match="'transformer_tiny' is an untrained architecture and "
                                         "has no tokenizers"):
        presets.load_tokenizers("transformer_tiny")
    with pytest.raises(ValueError, match=r"no .*tokenizers\.json and no .*config\.json"):
        presets.load_preprocessor(tmp_path)
    with pytest.raises(ValueError, match="Unknown preset .*nowhere.*: not a directory"):
        presets.load_tokenizers(tmp_path / "nowhere")


def test_the_old_part_loaders_warn_and_give_the_same_parts(trained):
    """The classmethods of the first release: aliases for one release, DeprecationWarning."""
    import keras_tf.models

    directory = trained["directory"]
    with pytest.warns(DeprecationWarning, match="use keras_tf.translation.presets.load_backbone"):
        model = Seq2SeqTransformer.from_preset(directory)
    assert model.config == trained["translator"].config
    with pytest.warns(DeprecationWarning, match="presets.load_preprocessor"):
        preprocessor = Seq2SeqPreprocessor.from_preset(directory)
    assert preprocessor.max_source_length == trained["translator"].preprocessor.max_source_length
    with pytest.warns(DeprecationWarning, match="presets.load_tokenizers"):
        tokenizers = Seq2SeqTokenizers.from_preset(directory)
    assert tokenizers.get_config() == trained["translator"].preprocessor.tokenizers.get_config()
    with pytest.warns(DeprecationWarning, match="import it from keras_tf.translation"):
        moved = keras_tf.models.Seq2SeqTranslator
    assert moved is Seq2SeqTranslator


def test_a_keras_file_from_model_checkpoint_keeps_tokenizers_decoding_and_adam(trained, tmp_path):
    """`keras.callbacks.ModelCheckpoint("x.keras")` in `fit`, then `keras.saving.load_model`."""
    translator = Seq2SeqTranslator.from_preset(trained["directory"])
    # jit_compile=False: not the default, so the loaded file shows that its
    # own compile settings came back.
    translator.compile(optimizer=keras.optimizers.Adam(1e-3, beta_2=0.98), jit_compile=False)
    sources, targets = make_pairs(48, seed=8)
    path = str(tmp_path / "checkpoint.keras")
    translator.fit(sources, targets, batch_size=16, epochs=1, verbose=0,
                   callbacks=[keras.callbacks.ModelCheckpoint(path)])
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, Seq2SeqTranslator)
    assert loaded.decoding == translator.decoding and loaded.config == translator.config
    assert loaded.preprocessor.tokenizers.get_config() == translator.preprocessor.tokenizers.get_config()
    assert (loaded.preprocessor.max_source_length, loaded.preprocessor.max_target_length) == (
        MAX_LENGTH, MAX_LENGTH)
    # The same weights, config, decoding and tokenizers decode the same: no
    # generate here (two XLA compiles); scoring strings reads the tokenizers
    # back from the file's assets.
    for saved, kept in zip(loaded.backbone.weights, translator.backbone.weights):
        np.testing.assert_array_equal(saved.numpy(), kept.numpy())
    np.testing.assert_array_equal(loaded.score(sources, targets), translator.score(sources, targets))
    assert loaded.jit_compile is False
    assert loaded.optimizer.learning_rate.numpy() == pytest.approx(1e-3)
    assert int(loaded.optimizer.iterations.numpy()) == 3  # 48 pairs in batches of 16
    for saved, kept in zip(loaded.optimizer.variables, translator.optimizer.variables):
        np.testing.assert_array_equal(saved.numpy(), kept.numpy())
    # from_config alone has no assets to read: a translator of token ids.
    ids_only = Seq2SeqTranslator.from_config(translator.get_config())
    assert ids_only.preprocessor is None and ids_only.decoding == translator.decoding
    with pytest.raises(ValueError, match="cannot read text"):
        ids_only.generate(sources[:1])


def test_a_previous_release_model_directory_loads(trained, tmp_path):
    """`keras-tf train` of the first release wrote config.json, model.keras and tokenizers/ only."""
    translator = trained["translator"]
    directory = tmp_path / "old"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(translator.config.to_dict()))
    translator.backbone.save(str(directory / "model.keras"))
    translator.preprocessor.tokenizers.save(str(directory / "tokenizers"))
    old = Seq2SeqTranslator.from_preset(str(directory))
    assert old.decoding == DecodingConfig()  # no decoding.json: greedy
    sources = trained["held_out"][0][:5]
    assert old.generate(sources) == translator.generate(sources, method="greedy")


def test_bad_presets_get_one_clear_error(trained, tmp_path):
    with pytest.raises(ValueError, match="Unknown preset 'transformer_huge': not a directory"):
        Seq2SeqTranslator.from_preset("transformer_huge")
    with pytest.raises(ValueError, match=r"is not a keras_tf preset \(no model.keras\)"):
        Seq2SeqTranslator.from_preset(str(tmp_path))
    with pytest.raises(ValueError, match=r"fixes its model and tokenizers; received \['d_model'\]"):
        Seq2SeqTranslator.from_preset(trained["directory"], d_model=64)
    metadata = tmp_path / "future"
    metadata.mkdir()
    for name in ("config.json", "model.keras"):
        (metadata / name).write_bytes(pathlib.Path(os.path.join(trained["directory"], name)).read_bytes())
    (metadata / "metadata.json").write_text(json.dumps({"format_version": 99}))
    with pytest.raises(ValueError, match="expected format_version=1; received format_version=99"):
        Seq2SeqTranslator.from_preset(str(metadata))
    (metadata / "metadata.json").unlink()
    other = get_preset("transformer_tiny", d_model=64).to_dict()
    (metadata / "config.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="model.keras was built with another config than config.json"):
        Seq2SeqTranslator.from_preset(str(metadata))
    with pytest.raises(ValueError, match="one target per source; received 2 sources and 1 targets"):
        trained["translator"].fit(["red", "blue"], ["rouge"], epochs=1, verbose=0)
    small = Seq2SeqTransformer(get_preset("transformer_tiny", source_vocabulary_size=8))
    with pytest.raises(ValueError, match="source tokenizer has 48 ids but the model's"):
        Seq2SeqTranslator(small, trained["translator"].preprocessor)
    with pytest.raises(ValueError, match="max_length=65 is beyond the model's positional range"):
        Seq2SeqTranslator(small, decoding=DecodingConfig(max_length=65))


# One fresh process: the SavedModel first, served by TensorFlow and TF-Text
# alone, before anything imports keras_tf; then from_preset and `keras-tf
# translate` on the preset directory.
_FRESH_PROCESS = """
import contextlib, io, json, sys
saved_model, preset, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text ops)
loaded = tf.saved_model.load(saved_model)
out = loaded.signatures["serving_default"](text=tf.constant(texts))
result = {"served": [t.decode() for t in out["translation"].numpy()],
          "served_with_keras_tf": any(m.startswith(("keras_tf", "keras_hub")) for m in sys.modules)}

from keras_tf.translation import Seq2SeqTranslator
translator = Seq2SeqTranslator.from_preset(preset)
result["texts"] = translator.generate(texts)
result["modules"] = sorted(m for m in sys.modules if m.startswith("keras_tf"))
from keras_tf.cli.main import main
sys.stdin = io.StringIO("".join(t + "\\n" for t in texts))
with contextlib.redirect_stdout(io.StringIO()) as printed:
    assert main(["translate", "--model", preset, "--beam-size", "4"]) == 0
result["cli"] = printed.getvalue().split("\\n")[: len(texts)]
print(json.dumps(result))
"""


def _run(command, stdin=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="error::UserWarning")
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_four_paths_give_the_same_strings(trained, tmp_path):
    """generate; in one fresh process, the SavedModel, from_preset, and `keras-tf translate`."""
    translator = trained["translator"]
    expected = translator.generate(TEXTS)
    assert expected[3] == ""  # the empty source
    export_dir = translator.export(str(tmp_path / "translator"))
    fresh = json.loads(_run(
        [sys.executable, "-c", _FRESH_PROCESS, export_dir, trained["directory"], json.dumps(TEXTS)]
    ).stdout)
    assert fresh["served"] == expected
    assert fresh["served_with_keras_tf"] is False  # TF Serving's view: no keras_tf, no keras-hub
    assert fresh["texts"] == expected
    assert "keras_tf.cli" not in fresh["modules"]  # from_preset needs no command line
    assert fresh["cli"] == expected  # `keras-tf translate --model DIR`, one line per line


def test_validation_bleu_in_fit_logs_what_keras_tf_evaluate_prints(trained, tmp_path, capsys):
    """`ValidationBleu` works on `translator.fit`: its BLEU is `keras-tf evaluate --beam-size 1`'s."""
    from keras_tf.cli.main import main
    from keras_tf.training.bleu import ValidationBleu

    sources, references = trained["held_out"]
    translator = Seq2SeqTranslator.from_preset(trained["directory"])
    # A learning rate of 0: the weights the callback decodes are the preset's.
    translator.compile(optimizer=keras.optimizers.SGD(0.0), jit_compile=False)
    callback = ValidationBleu(sources, references)
    history = translator.fit(sources[:8], references[:8], batch_size=8, epochs=1, verbose=0,
                             callbacks=[callback])
    logged = history.history["val_bleu"][0]
    assert callback.hypotheses == Seq2SeqTranslator.from_preset(trained["directory"]).generate(
        sources, method="greedy"
    )
    test = tmp_path / "test.tsv"
    test.write_text("".join(f"{s}\t{r}\n" for s, r in zip(sources, references)), encoding="utf-8")
    assert main(["evaluate", "--model", trained["directory"], "--test", str(test),
                 "--beam-size", "1"]) == 0
    printed = capsys.readouterr().out
    bleu = float(printed.split("BLEU = ")[1].split()[0])
    assert logged > 10 and round(logged, 2) == bleu, (logged, printed)
