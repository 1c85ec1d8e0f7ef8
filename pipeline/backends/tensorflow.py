"""The TensorFlow backend: a frozen GraphDef in one ``tf.compat.v1.Session``, the reference every
numeric comparison is made against.

    session = load("frozen.pb")                    # io from pipeline.graph.io
    session = TensorFlowSession(graph_def, io)     # a graph in memory (rewrite's passes)
    session.run({"input": images})                 # [array per io output]

Before anything runs, what the outputs need is screened (``pipeline.tf.screen``): nothing runs
that could act outside the graph. Random ops without a seed get one from their name
(``pipeline.tf.graph.seeded_graph_def``), so runs repeat. The imported graph stays open for the
first-divergence search (``graph``, ``graph_def``, ``tf``, ``input_tensor``).
"""

from pipeline.errors import DeployError
from pipeline.graph.io import graph_io, tensor_name


class TensorFlowSession:
    """The session shape of ``pipeline.backends`` over a frozen GraphDef."""

    name = "tensorflow"

    def __init__(self, graph_def, io, source="the frozen graph"):
        from pipeline.tf import import_tf
        from pipeline.tf.graph import seeded_graph_def
        from pipeline.tf.screen import screen_graph

        screen_graph(graph_def, source, outputs=[o["name"] for o in io["outputs"]])
        tf = import_tf()
        self.tf, self.io, self.source = tf, io, source
        self.graph_def = seeded_graph_def(graph_def)  # repeatable, whatever it holds
        self.graph = tf.Graph()
        with self.graph.as_default():
            try:
                tf.graph_util.import_graph_def(self.graph_def, name="")
            except ValueError as e:  # TensorFlow's words for a graph it cannot build (an Assign on a frozen constant)
                raise DeployError("{} does not import into TensorFlow: {}; was it frozen from a training graph? deploy "
                                  "check {} names what is left of training".format(
                                      source, str(e).splitlines()[0], source)) from None
        get = self.graph.get_tensor_by_name
        self._feeds = {i["name"]: get(tensor_name(i["name"])) for i in io["inputs"]}
        self._fetches = [get(tensor_name(o["name"])) for o in io["outputs"]]
        self.inputs = [(name, _shape(t), t.dtype.name) for name, t in self._feeds.items()]
        self.outputs = [(o["name"], _shape(t), t.dtype.name) for o, t in zip(io["outputs"], self._fetches)]
        self.output_names = [o["name"] for o in io["outputs"]]
        self.label = {"runtime": "tensorflow", "version": tf.__version__}
        self._session = None

    @property
    def input_tensor(self):
        """The first input's tf.Tensor (the image input of a one-input graph)."""
        return next(iter(self._feeds.values()))

    def run(self, feed):
        """{input name: array} -> [array per output]; one session is opened on the first run and kept."""
        if self._session is None:
            self._session = self.tf.compat.v1.Session(graph=self.graph)
        return self._session.run(self._fetches, {self._feeds[name]: value for name, value in feed.items()})

    def close(self):
        if self._session is not None:
            self._session.close()
            self._session = None

    def __repr__(self):
        return "<TensorFlowSession {}>".format(self.source)


def _shape(tensor):
    return None if tensor.shape.rank is None else tuple(tensor.shape.as_list())


def load(path, io=None, outputs=None):
    """A session for the frozen graph at ``path``: ``io`` as given, else pipeline.graph.io's rule."""
    from pipeline.tf.graph import load_graph_def

    graph_def = load_graph_def(path)
    if io is not None:
        names = {n.name for n in graph_def.node}
        missing = [s["name"] for s in io["inputs"] + io["outputs"] if s["name"].split(":")[0] not in names]
        if missing:
            raise DeployError("io names {} that {} does not have".format(", ".join(missing), path))
    return TensorFlowSession(graph_def, io or graph_io(graph_def, path, outputs), source=path)
