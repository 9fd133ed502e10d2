"""LoRA files are read and compared before anything changes; the factors are written atomically."""

import json

import h5py
import keras
import numpy as np
import pytest

from keras_tf.models import Seq2SeqTransformer, get_preset


def tiny(**overrides):
    return get_preset("transformer_tiny", num_encoder_layers=1, num_decoder_layers=1,
                      **overrides)


@pytest.fixture(scope="module")
def lora_file(tmp_path_factory):
    """A `save_lora_weights` file of rank 2 for query and value of `tiny()`."""
    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer(tiny())
    model.enable_lora(2)
    path = tmp_path_factory.mktemp("lora") / "domain.lora.h5"
    model.save_lora_weights(path)
    return path


def state(model):
    """What a refused load must leave alone: the weights, LoRA and who trains."""
    return (
        [np.array(w) for w in model.get_weights()],
        model.lora,
        [layer.trainable for layer in model._flatten_layers(include_self=False)],
        len(model.weights),
    )


def assert_same_state(before, after):
    assert len(before[0]) == len(after[0])
    for a, b in zip(before[0], after[0]):
        np.testing.assert_array_equal(a, b)
    assert before[1:] == after[1:]


def write_lora_like(path, datasets, **attributes):
    with h5py.File(path, "w") as file:
        for name, value in attributes.items():
            file.attrs[name] = value
        for name, value in datasets.items():
            file.create_dataset(name, data=value)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, lora_file):
    """name -> (a path, a fragment of the refusal)."""
    tmp_path = tmp_path_factory.mktemp("bad")
    files = {}
    # Another architecture's factors: d_model 16, right names, other shapes.
    other = Seq2SeqTransformer(tiny(d_model=16, num_heads=2, d_ff=32))
    other.enable_lora(2)
    other.save_lora_weights(tmp_path / "other.lora.h5")
    files["another architecture"] = (tmp_path / "other.lora.h5", "factors of another shape")
    # Two layers each side: factors this model lacks.
    deeper = Seq2SeqTransformer(get_preset("transformer_tiny"))
    deeper.enable_lora(2)
    deeper.save_lora_weights(tmp_path / "deeper.lora.h5")
    files["more layers"] = (tmp_path / "deeper.lora.h5", "factors the model lacks")
    # The right attributes, wrong shapes.
    with h5py.File(lora_file, "r") as source:
        names = []
        source.visititems(lambda n, i: names.append(n) if isinstance(i, h5py.Dataset) else None)
        write_lora_like(tmp_path / "shapes.lora.h5", {n: np.zeros((3, 3), "float32") for n in names},
                        rank=2, target_layer_names=source.attrs["target_layer_names"])
    files["wrong shapes"] = (tmp_path / "shapes.lora.h5", "factors of another shape")
    write_lora_like(tmp_path / "foreign.h5", {"x": np.zeros(3)}, title="not ours")
    files["a foreign HDF5"] = (tmp_path / "foreign.h5", "is not a LoRA file of save_lora_weights")
    plain = Seq2SeqTransformer(tiny())
    plain.save_weights(tmp_path / "model.weights.h5")
    files["a Keras .weights.h5"] = (tmp_path / "model.weights.h5", "is not a LoRA file")
    write_lora_like(tmp_path / "json.lora.h5", {}, rank=2, target_layer_names="not json")
    files["bad target_layer_names"] = (
        tmp_path / "json.lora.h5", "attribute target_layer_names must be a JSON list")
    write_lora_like(tmp_path / "names.lora.h5", {}, rank=2,
                    target_layer_names=json.dumps(["queries"]))
    files["unknown layer names"] = (tmp_path / "names.lora.h5", "No Dense layer named ['queries']")
    write_lora_like(tmp_path / "rank.lora.h5", {}, rank=0, target_layer_names='["query"]')
    files["rank 0"] = (tmp_path / "rank.lora.h5", "attribute rank must be a positive integer")
    (tmp_path / "text.lora.h5").write_text("hello")
    files["not HDF5"] = (tmp_path / "text.lora.h5", "is not an HDF5 file")
    return files


def test_a_file_that_does_not_fit_is_refused_and_changes_nothing(bad_files, lora_file):
    model = Seq2SeqTransformer(tiny())
    model(  # built
        {"encoder_tokens": np.array([[5, 3]]), "decoder_tokens": np.array([[1, 5]])})
    for case, (path, fragment) in bad_files.items():
        before = state(model)
        with pytest.raises(ValueError) as caught:
            model.load_lora_weights(path)
        message = str(caught.value)
        assert str(path) in message and fragment in message, (case, message)
        assert "\n" not in message, case
        assert_same_state(before, state(model))
    model.load_lora_weights(lora_file)  # and a good one still loads
    assert model.lora == {"rank": 2, "target_layer_names": ["query", "value"]}


def test_a_model_with_lora_keeps_its_factors_when_a_load_is_refused(bad_files):
    model = Seq2SeqTransformer(tiny())
    model.enable_lora(2)
    for variable in model._lora_variables().values():
        variable.assign(np.full(variable.shape, 0.5, "float32"))
    for case, (path, _) in bad_files.items():
        before = state(model)
        with pytest.raises(ValueError):
            model.load_lora_weights(path)
        assert_same_state(before, state(model))


def test_enable_lora_takes_one_name_as_a_string():
    model = Seq2SeqTransformer(tiny())
    model.enable_lora(2, "query")
    assert model.lora == {"rank": 2, "target_layer_names": ["query"]}
    with pytest.raises(ValueError, match="must be a non-empty list of layer names"):
        Seq2SeqTransformer(tiny()).enable_lora(2, [])
    with pytest.raises(ValueError, match="rank must be at most 32, the smaller side"):
        Seq2SeqTransformer(tiny()).enable_lora(100000)


def test_save_refuses_an_existing_file_unless_overwrite(tmp_path):
    model = Seq2SeqTransformer(tiny())
    model.enable_lora(2)
    path = tmp_path / "domain.lora.h5"
    path.write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="domain.lora.h5 exists; pass overwrite=True"):
        model.save_lora_weights(path)
    assert path.read_bytes() == b"mine"
    model.save_lora_weights(path, overwrite=True)
    fresh = Seq2SeqTransformer(tiny())
    fresh.load_lora_weights(path)
    assert fresh.lora == model.lora
    assert sorted(p.name for p in tmp_path.iterdir()) == ["domain.lora.h5"]  # no temporary left
