"""A frozen graph TensorFlow cannot build (a TF1 training graph frozen with its moving-average Assign ops: the
variable became a Const, the Assign still wants a reference) is one line naming the file, not a traceback."""

import pytest


@pytest.mark.tf
def test_a_frozen_training_graph_with_assign_ops_is_one_line_not_a_traceback(monkeypatch):
    """With --trust-model (the screen refuses an Assign before TensorFlow sees it otherwise)."""
    from pipeline.backends.tensorflow import TensorFlowSession
    from pipeline.tf.screen import TRUST_ENV

    monkeypatch.setenv(TRUST_ENV, "1")
    from pipeline.errors import DeployError
    from pipeline.graph import proto

    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    mean = graph_def.node.add(name="bn/moving_mean", op="Const")
    mean.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    mean.attr["value"].tensor.dtype = proto.DataType["DT_FLOAT"]
    mean.attr["value"].tensor.float_val.append(0.0)
    assign = graph_def.node.add(name="bn/Assign", op="Assign", input=["bn/moving_mean", "input"])
    assign.attr["T"].type = proto.DataType["DT_FLOAT"]
    graph_def.node.add(name="output", op="Identity", input=["input", "^bn/Assign"]).attr["T"].type = \
        proto.DataType["DT_FLOAT"]
    io = {"inputs": [{"name": "input", "shape": [None]}], "outputs": [{"name": "output"}]}
    from pipeline.tf import import_tf

    tf_graph_def = import_tf().compat.v1.GraphDef.FromString(graph_def.SerializeToString())
    with pytest.raises(DeployError) as e:
        TensorFlowSession(tf_graph_def, io, source="m.pb")
    message = e.value.message
    assert message.startswith("m.pb does not import into TensorFlow: Input 0 of node bn/Assign was passed float")
    assert "deploy check m.pb names what is left of training" in message and "\n" not in message
