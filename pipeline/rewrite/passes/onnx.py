"""Rewrite passes on ONNX models (``kind="onnx"``). Each is ``pass_name(model, options) -> (model, sites)``.

``model`` is an ``onnx.ModelProto``; ``options`` a dict (a pass reads only its own keys).
``sites`` names the nodes or tensors the pass changed; ``[]`` means nothing to do, and then the
model returned is the one passed in, unchanged. A pass never edits its argument in place. Edits
go through onnx-graphsurgeon (or the onnx package) and every graphsurgeon transform ends with
``graph.cleanup().toposort()``. Graph input and output names are kept, except by
``replace_nms_with_plugin``, which documents the outputs it changes.

Passes rewrite nodes of the main graph (lower_opset: of If/Loop/Scan bodies too); body nodes
that read a renamed or retyped outer tensor are kept consistent.
"""

from pipeline.errors import DeployError
from pipeline.rewrite.pass_table import rewrite_pass
from pipeline.rewrite.passes.onnx_opset import lower_opset, node_label

TRT_PLUGIN_DOMAIN = "trt.plugins"  # onnx.checker skips unknown domains; TensorRT's parser matches op_type only
NMS_OUTPUTS = ("num_detections", "detection_boxes", "detection_scores", "detection_classes")

# ------------------------------------------------------------------------------ passes


@rewrite_pass("onnx_fold_constants", kind="onnx", accepts=("size_threshold",))
def onnx_fold_constants(model, options):
    """Fold what constants alone compute (graphsurgeon fold_constants, static shapes too); sites = nodes removed.

    Options: ``size_threshold`` (bytes; larger results stay computed at run time, default: no limit).
    Shapes are inferred first so Shape ops on static dimensions fold. The producer of a graph
    output is never folded, so no output becomes an initializer. Constant nodes become
    initializers and dead nodes go too; both count as removed.
    """
    import onnx
    import onnx_graphsurgeon as gs

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is only a help for folding Shape ops
        inferred = model
    graph = gs.import_onnx(inferred)
    before = list(graph.nodes)
    graph.toposort()
    graph.fold_constants(size_threshold=options.get("size_threshold"),
                         should_exclude_node=lambda node: any(t in graph.outputs for t in node.outputs))
    graph.cleanup().toposort()
    kept = {id(node) for node in graph.nodes}
    sites = [node_label(node) for node in before if id(node) not in kept]
    if not sites:
        return model, []
    return _export(graph, model), sites


@rewrite_pass("retype_uint8_input", kind="onnx", changes_behaviour=True)
def retype_uint8_input(model, options):
    """A UINT8 graph input becomes FLOAT (same name, shape); its Cast(to=FLOAT) goes; uint8 only where a use needs it.

    TensorRT 8.2 has no UINT8 tensors. After the pass the input takes the same pixel values as
    float32 (integers 0..255); outputs are unchanged for such inputs. Consumers of the input:
    ``Cast(to=FLOAT)`` is removed (kept, as a float-to-float Cast, if its output is a graph
    output); a Cast to another type that holds 0..255 exactly (float16/double/bfloat16, int16+,
    uint8, bool) takes the float input as it is; any other consumer reads it through one inserted
    ``Cast(to=UINT8)`` (``<input>_uint8``), which keeps the model correct but leaves a UINT8
    tensor TensorRT cannot take (the sites name that Cast). Sites: the inputs retyped, the Casts
    removed or inserted.
    """
    import numpy as np
    import onnx
    import onnx_graphsurgeon as gs

    T = onnx.TensorProto
    exact = {T.FLOAT16, T.DOUBLE, T.BFLOAT16, T.INT16, T.INT32, T.INT64, T.UINT16, T.UINT32, T.UINT64, T.UINT8,
             T.BOOL}
    if not any(i.type.tensor_type.elem_type == T.UINT8 for i in model.graph.input):
        return model, []
    graph = gs.import_onnx(model)
    names = set(graph.tensors())
    returned = _returned(graph)
    sites = []
    for inp in graph.inputs:
        if inp.dtype != np.uint8:
            continue
        if inp in graph.outputs:
            raise DeployError("retype_uint8_input: input {} is also a graph output and cannot change type; "
                              "add an Identity between them before converting".format(inp.name))
        inp.dtype = np.float32
        sites.append(inp.name)
        as_uint8 = None
        for node in list(inp.outputs):
            if node.op == "Cast" and node.attrs.get("to") == T.FLOAT:
                if node.outputs[0].name not in returned:
                    sites.append(node_label(node))
                    _bypass(node.outputs[0], inp)
                    node.outputs.clear()
                continue
            if node.op == "Cast" and node.attrs.get("to") in exact:
                continue
            if as_uint8 is None:
                as_uint8 = gs.Variable(_unique(inp.name + "_uint8", names), dtype=np.uint8, shape=inp.shape)
                cast = gs.Node("Cast", _unique(inp.name + "_to_uint8", names), {"to": T.UINT8}, [inp], [as_uint8])
                graph.nodes.append(cast)
                sites.append(cast.name)
            _replace_input(node, inp, as_uint8)
    return _export(graph, model), sites


rewrite_pass("lower_opset", kind="onnx", accepts=("opset",))(lower_opset)  # in its place in the order


@rewrite_pass("replace_nms_with_plugin", kind="onnx", changes_behaviour=True,
              accepts=("iou_threshold", "max_output_boxes", "score_threshold", "background_class", "box_coding",
                       "score_activation"))
def replace_nms_with_plugin(model, options):
    """NonMaxSuppression becomes TensorRT's EfficientNMS_TRT plugin; CHANGES THE GRAPH'S OUTPUTS (caller must accept).

    Behaviour changes and ONNX Runtime cannot check it (it has no such op): check the result with
    TensorRT. The plugin node (domain ``trt.plugins``, plugin_version "1") takes the NMS boxes
    ``[N,B,4]`` and the scores transposed to ``[N,B,C]``, and outputs ``num_detections`` INT32
    ``[N,1]``, ``detection_boxes`` FLOAT ``[N,max,4]`` (always corner coordinates, in the order
    the boxes came in: [y1,x1,y2,x2] stays so), ``detection_scores`` FLOAT ``[N,max]``,
    ``detection_classes`` INT32 ``[N,max]``. These four replace every graph output computed from
    the NMS (its selected_indices and the Gather/TopK post-processing after it, which goes);
    other outputs stay. Attributes come from ``options`` first, else the NMS node:
    ``score_threshold`` (NMS input 4; absent: 0.0, i.e. scores are assumed non-negative),
    ``iou_threshold`` (input 3; absent: 0.0), ``max_output_boxes`` (input 2,
    max_output_boxes_per_class; note the plugin's limit is per image, not per class),
    ``background_class`` (-1), ``score_activation`` (0), ``box_coding`` (center_point_box).
    The plugin keeps at most the 4096 best scores before NMS. A DeployError when one of these
    inputs is computed at run time and no option gives it, when max_output_boxes would be 0, or
    when the graph has more than one NMS. Sites: the NMS node.
    """
    import numpy as np
    import onnx
    import onnx_graphsurgeon as gs

    if not any(n.op_type == "NonMaxSuppression" for n in model.graph.node):
        return model, []
    graph = gs.import_onnx(model)
    found = [n for n in graph.nodes if n.op == "NonMaxSuppression"]
    if len(found) > 1:
        raise DeployError("replace_nms_with_plugin: {} NonMaxSuppression nodes ({}); the pass replaces one".format(
            len(found), ", ".join(node_label(n) for n in found[:3])))
    nms = found[0]
    site = node_label(nms)
    where = "replace_nms_with_plugin: NonMaxSuppression {}".format(site)
    try:
        attrs = {
            "background_class": int(options.get("background_class", -1)),
            "box_coding": int(options.get("box_coding", nms.attrs.get("center_point_box", 0))),
            "iou_threshold": float(_nms_input(nms, 3, "iou_threshold", options, 0.0, where)),
            "max_output_boxes": int(_nms_input(nms, 2, "max_output_boxes", options, 0, where)),
            "plugin_version": "1",
            "score_activation": int(options.get("score_activation", 0)),
            "score_threshold": float(_nms_input(nms, 4, "score_threshold", options, 0.0, where)),
        }
    except (TypeError, ValueError) as e:
        raise DeployError("{}: an NMS option is not a number ({}); score_threshold and iou_threshold are floats, "
                          "the others integers".format(where, e))
    if attrs["box_coding"] not in (0, 1) or attrs["score_activation"] not in (0, 1):
        raise DeployError("{}: box_coding and score_activation must be 0 or 1 (got {} and {})".format(
            where, attrs["box_coding"], attrs["score_activation"]))
    if attrs["max_output_boxes"] <= 0:
        raise DeployError("{}: max_output_boxes_per_class is 0 or absent (it selects nothing); pass "
                          "options['max_output_boxes']".format(where))
    taken = set(graph.tensors()) & set(NMS_OUTPUTS)
    if taken:
        raise DeployError("{}: the graph already has tensors named {}; rename them before this pass".format(
            where, ", ".join(sorted(taken))))
    boxes, scores = nms.inputs[0], nms.inputs[1]
    batch = boxes.shape[0] if boxes.shape else "N"
    most = attrs["max_output_boxes"]
    real = np.float16 if boxes.dtype == np.float16 else np.float32
    outs = [gs.Variable(NMS_OUTPUTS[0], np.int32, [batch, 1]), gs.Variable(NMS_OUTPUTS[1], real, [batch, most, 4]),
            gs.Variable(NMS_OUTPUTS[2], real, [batch, most]), gs.Variable(NMS_OUTPUTS[3], np.int32, [batch, most])]
    graph.nodes.append(gs.Node("EfficientNMS_TRT", (nms.name or "nms") + "_trt", attrs,
                               [boxes, _scores_boxes_first(graph, scores)], outs, domain=TRT_PLUGIN_DOMAIN))
    downstream = _downstream(nms.outputs)
    first = next((i for i, t in enumerate(graph.outputs) if t.name in downstream), len(graph.outputs))
    kept = [t for t in graph.outputs if t.name not in downstream]
    graph.outputs = kept[:first] + outs + kept[first:]
    out = _export(graph, model)
    out.ir_version = max(out.ir_version, onnx.helper.find_min_ir_version_for(list(out.opset_import), True))
    return out, [site]


@rewrite_pass("onnx_remove_identity", kind="onnx")
def onnx_remove_identity(model, options):
    """Remove Identity and inference-mode Dropout nodes, keeping graph output names; sites = nodes removed.

    Dropout goes when it is an identity: opset 7-11, opset 12+ without training_mode or with a
    constant False one, opset < 7 with is_test=1; and only when its mask output is unused. A node
    whose output is a graph output goes by giving its producer that output's name; it stays when
    its input is a graph input, an initializer or another graph output (the two names must both
    exist), or when a subgraph returns its output directly.
    """
    import onnx_graphsurgeon as gs

    if not any(n.op_type in ("Identity", "Dropout") for n in model.graph.node):
        return model, []
    graph = gs.import_onnx(model)
    returned = _returned(graph, subgraphs_only=True)
    sites = []
    for node in list(graph.nodes):
        if not _is_identity(node, graph):
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if dst.name in returned:
            continue
        if dst in graph.outputs:
            producer_ok = isinstance(src, gs.Variable) and len(src.inputs) == 1 and src not in graph.outputs
            if not producer_ok:
                continue
            producer = src.inputs[0]
            sites.append(node_label(node))
            node.outputs.clear()
            node.inputs.clear()
            _bypass(src, dst)
            producer.outputs[producer.outputs.index(src)] = dst
        else:
            sites.append(node_label(node))
            _bypass(dst, src)
            node.outputs.clear()
            node.inputs.clear()
    if not sites:
        return model, []
    return _export(graph, model), sites




# ------------------------------------------------------------------------------ helpers


def _export(graph, like):
    """cleanup + toposort, export, and keep what export drops (IR version, metadata, docs)."""
    import onnx_graphsurgeon as gs

    graph.cleanup().toposort()
    out = gs.export_onnx(graph)
    out.ir_version = like.ir_version
    out.producer_name, out.producer_version = like.producer_name, like.producer_version
    out.domain, out.model_version, out.doc_string = like.domain, like.model_version, like.doc_string
    del out.metadata_props[:]
    out.metadata_props.extend(like.metadata_props)
    return out


def _returned(graph, subgraphs_only=False):
    """Names of the tensors a graph or any of its If/Loop/Scan bodies returns (they cannot be renamed)."""
    graphs = list(graph.subgraphs(recursive=True)) + ([] if subgraphs_only else [graph])
    return {t.name for g in graphs for t in g.outputs}


def _unique(name, taken):
    candidate, i = name, 1
    while candidate in taken:
        candidate, i = "{}_{}".format(name, i), i + 1
    taken.add(candidate)
    return candidate


def _replace_input(node, old, new):
    for i, t in enumerate(node.inputs):
        if t is old:
            node.inputs[i] = new


def _bypass(old, new):
    """Every consumer of tensor ``old`` (subgraph nodes included) reads ``new`` instead."""
    for consumer in list(old.outputs):
        _replace_input(consumer, old, new)


def _is_identity(node, graph):
    opset = graph.opset
    if node.op == "Identity":
        return len(node.inputs) == 1 and len(node.outputs) == 1
    if node.op != "Dropout" or not node.inputs or not node.outputs:
        return False
    mask = node.outputs[1] if len(node.outputs) > 1 else None
    if mask is not None and mask.name and (mask.outputs or mask in graph.outputs):
        return False  # the mask is used
    if opset < 7:
        return int(node.attrs.get("is_test", 0)) == 1
    if opset >= 12 and len(node.inputs) > 2 and node.inputs[2].name:
        mode = _constant_value(node.inputs[2])
        return mode is not None and not bool(mode.any())
    return True


def _nms_input(nms, index, key, options, default, where):
    """An NMS attribute: options[key], else the node's constant input ``index``, else ``default`` if absent."""
    if options.get(key) is not None:
        return options[key]
    if len(nms.inputs) <= index or not nms.inputs[index].name:
        return default
    value = _constant_value(nms.inputs[index])
    if value is None or value.size != 1:
        raise DeployError("{}: input {} ({}) is computed at run time; pass options['{}'] or run onnx_fold_constants "
                          "first".format(where, index, nms.inputs[index].name, key))
    return value.reshape(-1)[0].item()


def _constant_value(tensor):
    """The numpy value of an initializer or a Constant node's output; None for anything computed."""
    import onnx_graphsurgeon as gs

    if not isinstance(tensor, gs.Constant) and len(tensor.inputs) == 1 and tensor.inputs[0].op == "Constant":
        tensor = tensor.inputs[0].attrs.get("value")
    return tensor.values if isinstance(tensor, gs.Constant) else None


def _scores_boxes_first(graph, scores):
    """NMS scores [N,C,B] as the plugin wants them, [N,B,C]: undo a Transpose(0,2,1) or add one."""
    import onnx_graphsurgeon as gs

    producer = scores.inputs[0] if len(scores.inputs) == 1 else None
    if producer is not None and producer.op == "Transpose" and list(producer.attrs.get("perm", [])) == [0, 2, 1]:
        return producer.inputs[0]
    shape = [scores.shape[0], scores.shape[2], scores.shape[1]] if scores.shape and len(scores.shape) == 3 else None
    out = gs.Variable(_unique(scores.name + "_boxes_first", set(graph.tensors())), scores.dtype, shape)
    graph.nodes.append(gs.Node("Transpose", out.name, {"perm": [0, 2, 1]}, [scores], [out]))
    return out


def _downstream(tensors):
    """Names of every tensor computed from ``tensors`` (theirs included)."""
    seen, stack = set(), list(tensors)
    while stack:
        tensor = stack.pop()
        if tensor.name in seen:
            continue
        seen.add(tensor.name)
        for node in tensor.outputs:
            stack.extend(node.outputs)
    return seen
