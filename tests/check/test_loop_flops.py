"""FLOPs count loop bodies (pipeline.check.compute): a conv or matrix product inside a while loop runs once
per iteration, so an LSTM's cell counts its trip count times where the graph fixes it, and the total is
unknown where a sequence length is fixed only at run time (the newcomer's "256 FLOPs" for an LSTM text
classifier was its Dense layer alone: the cell's MatMuls read their kernels through Enter and counted 0).

The graphs are frozen the way deploy's freeze stage freezes (convert_variables_to_constants_v2, control
flow lowered to Enter/Merge/Switch/NextIteration/Exit frames)."""

import pytest

pytestmark = pytest.mark.tf

EMBED, UNITS, CLASSES = 8, 4, 2
# one iteration of a Keras LSTM cell: x_t @ kernel [EMBED, 4*UNITS] and h @ recurrent_kernel [UNITS, 4*UNITS]
CELL = 2 * EMBED * 4 * UNITS + 2 * UNITS * 4 * UNITS
DENSE = 2 * UNITS * CLASSES


def _keras_lstm(path, steps):
    import numpy as np

    from pipeline.tf import import_tf

    tf = import_tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(0)
    inp = keras.Input(shape=(steps,), dtype="int32", name="x")
    y = keras.layers.Embedding(50, EMBED)(inp)
    y = keras.layers.LSTM(UNITS)(y)
    model = keras.Model(inp, keras.layers.Dense(CLASSES, activation="softmax")(y))
    model(np.zeros((1, steps or 3), "int32"))
    concrete = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([None, steps], tf.int32, name="x"))
    path.write_bytes(convert_variables_to_constants_v2(concrete).graph.as_graph_def().SerializeToString())
    return path


def test_an_lstm_over_a_fixed_length_counts_its_cell_once_per_step(tmp_path):
    from pipeline.check.compute import conv_flops, tftrt_share
    from pipeline.graph.readers import read_model

    graph = read_model(_keras_lstm(tmp_path / "lstm6.pb", 6))
    by_conv, _, loops = conv_flops(graph)
    assert [(loop["trip_count"], loop["flops_per_iteration"]) for loop in loops] == [(6, CELL)]
    assert sum(by_conv.values()) == 6 * CELL + DENSE
    share = tftrt_share(graph, lambda op: True)
    assert share["flops"] == 6 * CELL + DENSE and share["loops"][0]["trip_count"] == 6


def test_an_lstm_over_a_run_time_length_has_unknown_flops(tmp_path):
    from pipeline.check.compute import tftrt_share
    from pipeline.graph.readers import read_model

    share = tftrt_share(read_model(_keras_lstm(tmp_path / "lstm_any.pb", None)), lambda op: True)
    assert share["flops"] is None  # never the Dense layer's 16 alone
    assert [(loop["trip_count"], loop["flops_per_iteration"]) for loop in share["loops"]] == [(None, CELL)]


def test_a_tf1_while_loop_over_three_steps(tmp_path):
    from field_graphs import lstm_dynamic, lstm_unrolled

    from pipeline.check.compute import conv_flops
    from pipeline.graph.readers import read_model

    looped, looped_loops = conv_flops(read_model(lstm_dynamic(tmp_path / "while.pb")))[0::2]
    unrolled, unrolled_loops = conv_flops(read_model(lstm_unrolled(tmp_path / "unrolled.pb")))[0::2]
    assert [loop["trip_count"] for loop in looped_loops] == [3] and unrolled_loops == []
    assert sum(looped.values()) == sum(unrolled.values()) == 3 * 2 * 8 * 16  # the same cell, three steps either way
