"""Where a frozen graph's control flow lives, for the passes that must leave it alone (no TensorFlow needed).

The frame finding itself is pipeline.graph.frames (the check uses it too, so it never advises a
rewrite these passes refuse); these take a rewrite graph. A frozen Keras LSTM's lowered while loop:
Enter -> Merge -> Switch -> body -> NextIteration -> Merge, Exit out; inside a frame an Identity
carries loop state, a Switch's pivot or a control edge, and no node can become a root-frame Const.
"""

from pipeline.graph import frames
from pipeline.graph.frames import CONTROL_FLOW_OPS, FRAME_OPS, FUNCTIONAL_OPS, LOOP_OPS  # noqa: F401

__all__ = ["CONTROL_FLOW_OPS", "FRAME_OPS", "FUNCTIONAL_OPS", "LOOP_OPS", "readers", "frame_nodes", "feed_dependent"]


def readers(graph):
    """name -> names that read it (data or control)."""
    return frames.readers(frames.tf_edges(graph))


def frame_nodes(graph, seeds=("Enter", "RefEnter", "Switch", "RefSwitch"),
                leaves=("Exit", "RefExit", "Merge", "RefMerge")):
    """Names of the nodes inside a loop frame or a cond branch (pipeline.graph.frames.frame_nodes)."""
    return frames.frame_nodes(frames.tf_edges(graph), seeds, leaves)


def feed_dependent(graph):
    """Names of the nodes that need a fed Placeholder to run (pipeline.graph.frames.feed_dependent)."""
    return frames.feed_dependent(frames.tf_edges(graph))
