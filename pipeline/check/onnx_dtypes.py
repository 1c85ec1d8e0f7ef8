"""The dtype rules of the ONNX check (onnx_rules.onnx_findings): every tensor's type against the
target's TensorRT version — network inputs, each node's data inputs and outputs against the op's
types (the ONNX schema's type variable), STRING / sequence / optional tensors (no TensorRT version
has them), INT8 outside Q/DQ, io-only types (UINT8) inside the network (and, at the network's edge,
only into ops whose row lists them), Q/DQ's quantized type against ``quantized_types`` and
DequantizeLinear's row (no row of 8.2, 8.5 or 10.1 lists UINT8), types the parser
has no mapping for (BF16 on 8.x). A mixin of onnx_rules' rule walker: it reads ``self.out`` (the
findings collector), ``self.table``, ``self.typed``, ``self.io``, ``self.cast_down``, ``self.quantized``,
``self.io_only``, ``self.io_names``, ``self.version`` and ``self.opset``.
"""

from pipeline.check.onnx_types import data_type_var, formal_param, schema_of, type_name


# the tensors of Q/DQ that carry the quantized type: (role, index)
_QDQ_QUANTIZED = {"QuantizeLinear": (("output", 0), ("input", 2)),
                  "DequantizeLinear": (("input", 0), ("input", 2))}


class TypeRules:
    """Type rules of the ONNX rule walker (onnx_rules): network inputs, node types, tensors as such."""

    def check_input(self, info, scope):
        kind = scope.kind(info.name)
        if kind is None or not self.typed:
            return
        if kind[0] != "tensor":
            self.structure(kind[0], info.name, info.name, "graph input")
            return
        name = type_name(kind[1]) if kind[1] else None
        if name is None:
            return
        if name == "INT64" and self.cast_down.get("INT64") == "INT32":
            from pipeline.check.findings import INT64_INPUT_FIX

            self.out.add("warning", "dtype", None, ("input", info.name), info.name, info.name,
                         "input {} is INT64; {} casts INT64 to INT32".format(info.name, self.version),
                         INT64_INPUT_FIX)
        elif name in self.quantized:
            self.out.add("blocker", "dtype", None, ("input", info.name), info.name, info.name,
                         "input {} is {}; {} takes {} only through QuantizeLinear/DequantizeLinear, never as a network "
                         "input".format(info.name, name, self.version, name),
                         "feed float32 and quantize inside the model (QuantizeLinear), or let TensorRT calibrate "
                         "(int8 precision)")
        elif name not in self.io and name not in self.cast_down:
            self.out.add("blocker", "dtype", None, ("input", info.name), info.name, info.name,
                         "input {} is {}; {} has no {} tensors".format(info.name, name, self.version, name),
                         "feed float32 instead (rewrite retype_uint8_input) and convert on the host side",
                         "retype_uint8_input")

    # -- one node -----------------------------------------------------------------------------------

    def effective(self, name):
        return self.cast_down.get(name, name)

    def check_types(self, node, path, scope, entry):
        if not self.typed:
            return
        op = node.op_type
        for tensor in node.output:
            if tensor:
                self.check_tensor(node, path, scope, tensor)
        if entry is None or not entry.supported or entry.types is None:
            return
        schema = schema_of(op, node.domain, self.opset)
        if op in _QDQ_QUANTIZED:
            self.check_quantized(node, path, scope, entry)
        var = data_type_var(schema, op)
        if var is None:
            return
        allowed = set(entry.types)
        checked = []
        for index, tensor in enumerate(node.input):
            formal = formal_param(schema.inputs, index)
            if tensor and formal is not None and (formal.type_str == var or (op == "Pow" and index == 1)):
                checked.append(("input", index, tensor))
        for index, tensor in enumerate(node.output):
            formal = formal_param(schema.outputs, index)
            if tensor and formal is not None and (formal.type_str == var or op in ("Cast", "CastLike")):
                checked.append(("output", index, tensor))
        for role, index, tensor in checked:
            if (role, index) in _QDQ_QUANTIZED.get(op, ()):
                continue  # check_quantized asks these
            kind = scope.kind(tensor)
            if kind is None or kind[0] != "tensor" or not kind[1]:
                continue
            raw = type_name(kind[1])
            name = self.effective(raw)
            if name in allowed or raw in allowed:
                continue
            if name in self.quantized and op in ("QuantizeLinear", "DequantizeLinear"):
                continue
            if raw in ("STRING",) or raw not in self.io and raw not in self.cast_down:
                continue  # the tensor rule says it once
            integer_pow = op == "Pow" and name in ("INT32", "INT64", "INT8", "UINT8")
            cause = "{} {}: {} {} {} is {}{}; the {} parser's {} takes {}".format(
                op, path, role, index, tensor, raw, " (read as {})".format(name) if name != raw else "",
                self.version, op, ", ".join(entry.types))
            fix = ("compute Pow in float (Cast to FP32 before it, back after) — integer Pow is not supported"
                   if integer_pow else
                   "Cast the tensor to a listed type around {} (e.g. FP32), or replace the op".format(op))
            self.out.add("blocker", "dtype", op, name, path, tensor,
                         ("integer Pow: " if integer_pow else "") + cause, fix)

    def check_quantized(self, node, path, scope, entry):
        """QuantizeLinear's output and zero point, DequantizeLinear's input and zero point: a quantized
        type of this release (``quantized_types``) that DequantizeLinear's row lists."""
        op = node.op_type
        dq = self.table.lookup("DequantizeLinear") if op == "QuantizeLinear" else entry
        listed = set(self.quantized) & set(getattr(dq, "types", None) or ())
        for role, index in _QDQ_QUANTIZED[op]:
            names = node.output if role == "output" else node.input
            tensor = names[index] if index < len(names) else ""
            kind = scope.kind(tensor) if tensor else None
            if kind is None or kind[0] != "tensor" or not kind[1]:
                continue
            raw = type_name(kind[1])
            if raw in listed:
                continue
            self.out.add("blocker", "dtype", op, ("quantized_type", raw), path, tensor,
                         "{} {}: {} {} {} is {}; the {} parser quantizes to {} only".format(
                             op, path, role, index, tensor, raw, self.version, ", ".join(sorted(listed)) or "nothing"),
                         "quantize to INT8 with a zero point of 0 (symmetric; TensorRT has no {} quantization), or "
                         "let TensorRT calibrate (int8 precision)".format(raw))

    def check_tensor(self, node, path, scope, tensor):
        """Rules for a tensor as such, checked at its producer."""
        kind = scope.kind(tensor)
        if kind is None:
            return
        if kind[0] != "tensor":
            self.structure(kind[0], path, tensor, "output of {}".format(node.op_type))
            return
        if not kind[1]:
            return
        raw = type_name(kind[1])
        name = self.effective(raw)
        op = node.op_type
        if raw == "STRING":
            self.out.add("blocker", "dtype", op, "STRING", path, tensor,
                         "{} {}: {} is a STRING tensor; no TensorRT version has string tensors".format(op, path, tensor),
                         "do string processing (decoding, tokenising, lookups) on the host, outside the model; cut "
                         "the graph at the first numeric tensor")
        elif raw not in self.io and raw not in self.cast_down and name not in self.io:
            self.out.add("blocker", "dtype", op, ("type", raw), path, tensor,
                         "{} {}: {} is {}; {} has no {} tensors".format(op, path, tensor, raw, self.version, raw),
                         "Cast to a type {} has ({}) before conversion".format(
                             self.version, ", ".join(sorted(self.io - self.quantized - self.io_only))))
        elif name in self.quantized and op != "QuantizeLinear" and op != "Constant":
            self.out.add("blocker", "dtype", op, ("quantized", raw), path, tensor,
                         "{} {}: {} is {} outside QuantizeLinear/DequantizeLinear; {} takes {} only through Q/DQ".format(
                             op, path, tensor, raw, self.version, raw),
                         "keep the tensor in float and quantize with QuantizeLinear/DequantizeLinear (or let TensorRT "
                         "calibrate)")
        elif name in self.io_only and tensor not in self.io_names:
            self.out.add("blocker", "dtype", op, ("io_only", raw), path, tensor,
                         "{} {}: {} is {} inside the network; {} has {} only as a network input or output".format(
                             op, path, tensor, raw, self.version, raw),
                         "Cast to FP32 (or INT32) instead, or make the {} tensor a network input/output".format(raw))

    def structure(self, what, path, tensor, where):
        self.out.add("blocker", "dtype", None, ("structure", what), path, tensor,
                     "{} ({}) is a {} value; no TensorRT version has {} tensors".format(
                         tensor, where, what, what),
                     "replace the {} ops (SequenceConstruct/SplitToSequence/Optional...) by plain tensors: Concat, "
                     "Split, or fixed-size outputs".format(what))
