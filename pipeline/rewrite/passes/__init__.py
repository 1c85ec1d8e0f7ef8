"""The rewrite passes, by theme. Importing this package registers them all (``pipeline.rewrite.passes()``).

The import order below is the order passes run in when several are chosen: shapes and cuts first,
then the behaviour-changing training-mode passes, clean-ups, folding, op substitutions; ONNX
passes on their own. A new pass goes into the module of its theme (copy ``cleanup.prune`` for a
TensorFlow pass, ``onnx.onnx_remove_identity`` for an ONNX one) with an equivalence test in
``tests/rewrite/``.
"""

from pipeline.rewrite.passes import shapes  # noqa: F401  cut, set_input_shape
from pipeline.rewrite.passes import training_mode  # noqa: F401  strip_dropout, bn_inference
from pipeline.rewrite.passes import cleanup  # noqa: F401  remove_identity, prune
from pipeline.rewrite.passes import folding  # noqa: F401  fold_constants, fold_batchnorm, fold_pad, drop_noop_cast
from pipeline.rewrite.passes import activations  # noqa: F401  substitute_activations, uff_compat
from pipeline.rewrite.passes import uff_shape  # noqa: F401  fold_shape
from pipeline.rewrite.passes import onnx  # noqa: F401  the ONNX passes
