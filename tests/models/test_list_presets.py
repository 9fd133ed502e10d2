"""`list_presets` names every preset and says it is an untrained architecture."""

from keras_tf.models import PRESETS, get_preset, list_presets


def test_every_preset_is_listed_as_an_untrained_architecture():
    listed = list_presets()
    assert list(listed) == list(PRESETS)
    for name, description in listed.items():
        config = get_preset(name)
        assert description.startswith("untrained architecture: "), description
        assert f"d_model={config.d_model}," in description
        assert f"{config.num_encoder_layers}+{config.num_decoder_layers} layers" in description
