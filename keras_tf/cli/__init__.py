"""The `keras-tf` command line: `keras_tf.cli.main.main` dispatches to one module per command."""
