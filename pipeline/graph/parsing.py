"""Telling protobuf model files apart and parsing them, with short reasons for one-line errors.

    sniff_protobuf(path, expected)   # "text" | "onnx" | "binary", by content
    msg, reason = parse_binary(cls, data) / parse_text(cls, text)
    read_bytes(path, what)           # DeployError naming the file when unreadable or empty

Shared by the TensorFlow reader (``pipeline.graph.tf_reader``) and the ONNX reader.
"""

import re

from pipeline.errors import DeployError
from pipeline.files import MODEL_BYTES, open_regular, read_regular

OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.>\-]*\Z")


_TEXT_START = re.compile(rb"\s*(#[^\n]*\n\s*)*(node|versions|library|meta_graphs|graph_def|meta_info_def|"
                         rb"saved_model_schema_version|signature_def|collection_def|saver_def)\s*[{:]")


def sniff_protobuf(path, expected):
    """What a protobuf model file holds, by content: "text" (protobuf text format: a GraphDef,
    SavedModel or meta graph), "onnx" (an ONNX model) or "binary" (TensorFlow's binary protobuf).
    ``expected``: what the file's name says; content only overrules it when it clearly is another
    format (so a broken file gets the message of the format its name says, and a big binary
    GraphDef is not parsed twice)."""
    try:
        with open_regular(path, "a model file", MODEL_BYTES) as handle:
            head = handle.read(4096)
    except OSError:
        return expected
    if _TEXT_START.match(head):
        return "text"
    if expected == "binary":
        return "onnx" if head[:1] == b"\x08" and _is_onnx(read_bytes(path, "a model file")) else "binary"
    data = read_bytes(path, "a model file")  # a .onnx or .pbtxt file that is not text: which binary is it?
    if _is_onnx(data):
        return "onnx"
    return "binary" if _is_tf_binary(data) else expected


def _is_tf_binary(data):
    from pipeline.graph import proto

    for cls in (proto.GraphDef, proto.MetaGraphDef, proto.SavedModel):
        msg, _ = parse_binary(cls, data)
        if msg is None:
            continue
        graphs = [msg] if cls is proto.GraphDef else [msg.graph_def] if cls is proto.MetaGraphDef else \
            [m.graph_def for m in msg.meta_graphs]
        if any(looks_like_graph(g) for g in graphs):
            return True
    return False


def _is_onnx(data):
    """An ONNX ModelProto with an opset and at least one node (a GraphDef's bytes parse as an empty one)."""
    if data[:1] != b"\x08":  # ModelProto starts with ir_version (field 1, varint) as onnx writes it
        return False
    try:
        import onnx
    except ImportError:
        return False
    model, _ = parse_binary(onnx.ModelProto, data)
    return model is not None and bool(model.opset_import) and bool(model.graph.node) and \
        all(isinstance(n.op_type, str) and OP_NAME.match(n.op_type) for n in model.graph.node[:3])


def read_bytes(path, what):
    """The bytes of a model file: a regular file (a named pipe, a device or a socket is refused by name, never
    opened to wait or read forever) of at most MODEL_BYTES (protobuf's 2 GiB), not empty."""
    try:
        data = read_regular(path, what, MODEL_BYTES)
    except OSError as e:
        raise DeployError("{}: cannot read {}: {}".format(path, what, e.strerror or e))
    if not data:
        raise DeployError("{}: file is empty; expected {}".format(path, what))
    return data


def parse_binary(cls, data):
    """(message, None) or (None, a short reason)."""
    from google.protobuf.message import DecodeError

    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        return None, reason(e)
    return msg, None


def parse_text(cls, text):
    from google.protobuf import text_format

    msg = cls()
    try:
        text_format.Parse(text, msg, allow_unknown_field=True)
    except text_format.ParseError as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        where = re.match(r"(\d+):(\d+) : (?:'.*': )?(.*)", text)
        if where:
            return None, reason("line {} column {}: {}".format(where.group(1), where.group(2), where.group(3)))
        return None, reason(e)
    return msg, None


def reason(error):
    """A parse error as a short phrase for a one-line message."""
    text = (str(error).strip().splitlines() or [""])[0]
    text = re.sub(r"^Error parsing message( with type '[^']*')?:?\s*", "", text)
    text = text or "parse error"
    text = text[:1].lower() + text[1:]
    return text if len(text) <= 100 else text[:97] + "..."


def has_unknown_fields(msg):
    try:
        from google.protobuf import unknown_fields

        return len(unknown_fields.UnknownFieldSet(msg)) > 0
    except Exception:  # older protobuf: cannot tell
        return False


def looks_like_graph(graph_def):
    """Nodes with names and op names: tells a real GraphDef from other bytes that happen to parse."""
    nodes = graph_def.node
    if not nodes:
        return False
    for i in {0, len(nodes) // 2, len(nodes) - 1}:
        node = nodes[i]
        if not node.name or not OP_NAME.match(node.op):
            return False
    return True
