"""Questions about a graph view that check and rewrite both ask.

    constant_subgraph(graph)     # nodes computed from constants only (folded before conversion)
    input_dtype(graph, tensor)   # a graph input's dtype name
    topological_names(graph_def) # a GraphDef's node names, producers first (first-divergence search)
"""

FUSED_BATCH_NORM = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
# Random ops: never folded, whatever feeds them (check's patterns name them as stochastic).
RANDOM = ("RandomUniform", "RandomUniformInt", "RandomStandardNormal", "StatelessRandomUniformV2", "StatelessRandomUniform")


def constant_subgraph(graph, frozen=()):
    """Nodes computed from constants only (not Const itself): tf2onnx and TF-TRT fold them away
    before conversion, so their ops never reach the parser (e.g. Rsqrt of a batch norm's variance).
    ``frozen``: variable nodes that freezing will turn into constants.

    One pass in file order when every node comes after its inputs' producers (as graphs are
    written); a graph with a forward reference is solved from the constants forward instead."""
    const = {n.name for n in graph.nodes.values() if n.op == "Const"} | set(frozen)
    if graph.kind == "tensorflow":
        folded = _fold_in_file_order(graph, set(const))  # a copy: it may give up half way
        if folded is not None:
            return folded
    return _fold_from_constants(graph, const)


def _never_folded(op, cache):
    """Random ops; the variables, stochastic and input-pipeline families (``cache``: op -> answer)."""
    skip = cache.get(op)
    if skip is None:
        from pipeline.targets.families import family_of

        fam = family_of(op)
        skip = cache[op] = op in RANDOM or (fam is not None and fam.name in ("variables", "stochastic", "input_pipeline"))
    return skip


def _fold_in_file_order(graph, const):
    """constant_subgraph of a TF view whose nodes all come after their data inputs' producers, else
    None (a producer later in the file, or missing: a node decided early may be wrong)."""
    folded, seen, never = set(), set(), {}
    nodes = graph.nodes
    for name, node in nodes.items():
        seen.add(name)
        inputs = node.inputs
        if name in const or not inputs:
            continue
        for tensor in inputs:
            if tensor in const:
                continue
            source = tensor.lstrip("^").partition(":")[0] if (":" in tensor or "^" in tensor) else tensor
            if source in const:
                continue
            if source not in seen:
                return None  # a forward reference (a loop's back edge, a hand-ordered file): the general way
            break
        else:
            if not _never_folded(node.op, never):
                const.add(name)
                folded.add(name)
    return folded


def _fold_from_constants(graph, const):
    folded = set()
    work = list(const)
    index = graph.consumer_index()
    tensorflow = graph.kind == "tensorflow"
    producer_name = graph.producer_name
    never = {}  # op -> never folded
    while work:  # from the constants forward: only their consumers are ever looked at
        for node in index.get(work.pop(), ()):
            name = node.name
            if name in const:
                continue
            if _never_folded(node.op, never):
                continue
            for i in node.inputs:
                if (i.lstrip("^").partition(":")[0] if tensorflow else producer_name(i)) not in const:
                    break
            else:
                const.add(name)
                folded.add(name)
                work.append(name)
    return folded


def input_dtype(graph, tensor):
    """A graph input's dtype name (TF: the Placeholder's dtype attr, without typing every tensor)."""
    if graph.kind == "tensorflow":
        node = graph.producer(tensor)
        dtype = node.attrs.get("dtype") if node is not None else None
        return str(dtype) if dtype else None
    return graph.tensor_types.get(tensor)


def topological_names(graph_def):
    """A GraphDef's node names in topological order, ties (and cycles: loop back-edges) in GraphDef
    order (Kahn's algorithm, smallest file index first). Works on TensorFlow's GraphDef and on
    pipeline.graph.proto's, without building a view; a view has ``Graph.topological_order()``."""
    import heapq

    nodes = graph_def.node
    index = {n.name: k for k, n in enumerate(nodes)}
    waiting = [{index.get(i.lstrip("^").split(":")[0], k) for i in n.input} - {k} for k, n in enumerate(nodes)]
    users = [[] for _ in nodes]
    for k, deps in enumerate(waiting):
        for d in deps:
            users[d].append(k)
    ready, order = [k for k, deps in enumerate(waiting) if not deps], []
    while ready:
        order.append(heapq.heappop(ready))
        for u in users[order[-1]]:
            waiting[u].discard(order[-1])
            if not waiting[u]:
                heapq.heappush(ready, u)
    done = set(order)
    return [nodes[k].name for k in order] + [n.name for k, n in enumerate(nodes) if k not in done]
