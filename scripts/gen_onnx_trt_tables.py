"""Generate deploy's ONNX-parser op tables (targets/ops/onnx_trt_{8.2,8.5,10}.yaml) from onnx-tensorrt's
docs/operators.md at the release each table is for.

    git clone https://github.com/onnx/onnx-tensorrt
    python scripts/gen_onnx_trt_tables.py --reference onnx-tensorrt           # writes targets/ops/onnx_trt_*.yaml
    python scripts/gen_onnx_trt_tables.py --reference onnx-tensorrt --check   # exit 1 when a table is out of date
    python scripts/gen_onnx_trt_tables.py --reference DIR --out DIR

The source of each table is docs/operators.md of https://github.com/onnx/onnx-tensorrt at the commit
NVIDIA/TensorRT's ``parsers/onnx`` submodule names at that release tag (``git ls-tree <tag> parsers/onnx``
in NVIDIA/TensorRT): RELEASES below lists the commits, and each table names its commit in ``sources`` and
``source_commit``. ``--reference`` is a clone of onnx-tensorrt (the file is read with ``git show
<commit>:docs/operators.md``) or a folder of copies named as RELEASES' ``file`` says. Each row becomes one
op entry: its types (machine-readable,
TYPES names), its restriction sentences, and the structured restatements checkers use (const_inputs,
spatial_dims, unsupported_outputs, input_rank, padded_output, attributes, unsupported_attributes), found by the rules
below and by the ONNX operator schemas (input, output and attribute names).

Where operators.md and the parser source at the same commit disagree, the parser decides: PARSER lists
each correction with the file it comes from, and the table's notes say why. The output is deterministic
(no dates): tests/check/test_onnx_rules.py re-runs this script and compares.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "targets" / "ops"
TYPES = ("FP64", "FP32", "FP16", "BF16", "FP8", "INT64", "INT32", "INT8", "INT4", "UINT8", "BOOL")
REPO = "https://github.com/onnx/onnx-tensorrt"

# table -> the name of an operators.md copy, the TensorRT release it is for, the onnx-tensorrt commit, and
# the table's version-level facts that come from the parser source rather than operators.md. ``upper``: the
# 10.15 table (docs/operators.md at fa5aa9f6; only its rows are read), an upper bracket for 10.3.
RELEASES = {
    "onnx_trt_8.2": {
        "file": "operators_trt8.2.1.md", "release": "8.2.1", "tensorrt": "8.2",
        "commit": "e9456d57605c883cdf985e634ab483e2c1500bb1",
        "jetpack": "JetPack 4.6.x (TX2, Nano, Xavier) ships TensorRT 8.2.1",
        # onnx2trt_utils.cpp convertDtype at the commit: the ONNX types a network input/output may have
        "io_types": ["FP32", "FP16", "INT32", "INT8", "BOOL"],
        "cast_down": {"INT64": "INT32", "FP64": "FP32"},
        "quantized_types": ["INT8"],
        "io_only_types": [],
    },
    "onnx_trt_8.5": {
        "file": "operators_trt8.5.2.md", "release": "8.5.2", "tensorrt": "8.5",
        "commit": "7583da4c62475e84b7be31f4b8fb0c101873d434",
        "jetpack": "JetPack 5.1.x (Xavier, Orin) ships TensorRT 8.5.2",
        "io_types": ["FP32", "FP16", "INT32", "INT8", "UINT8", "BOOL"],
        "cast_down": {"INT64": "INT32", "FP64": "FP32"},
        "quantized_types": ["INT8"],
        "io_only_types": ["UINT8"],
    },
    "onnx_trt_10": {
        "file": "operators_trt10.1.md", "release": "10.1", "tensorrt": "10.1",
        "commit": "96e781103cfc4adf4a6bb557e94bac8e693f6f4c",
        "jetpack": "JetPack 6.1/6.2 (Orin) ships TensorRT 10.3; this is the 10.1 table, the closest release read "
                   "(the 10.3 pin 62bdde2a was not available)",
        "io_types": ["FP32", "FP16", "BF16", "INT64", "INT32", "INT8", "FP8", "INT4", "UINT8", "BOOL"],
        "cast_down": {"FP64": "FP32"},
        "quantized_types": ["INT8", "FP8", "INT4"],
        "io_only_types": ["UINT8"],
        "upper": "operators_trt10.15_table.md", "upper_commit": "fa5aa9f61e7781d2ca8f5351d42c1f19525a6124",
    },
}

_SRC_82 = "builtin_op_importers.cpp / onnx2trt_utils.cpp @ e9456d57"
_SRC_85 = "builtin_op_importers.cpp / onnx2trt_utils.cpp @ 7583da4c"
_SRC_10 = "onnxOpImporters.cpp / importerUtils.cpp @ 96e78110"
# Corrections from the parser source at the table's commit: table -> op -> (changes, why).
PARSER = {
    "onnx_trt_8.2": {
        "ReduceSum": ({"const_inputs": {1: "axes"}},
                      "ReduceSum-13 takes `axes` as an input; reduceTensor asserts 'Axis input must be an initializer!' "
                      "(onnx2trt_utils.cpp @ e9456d57)"),
        "ConstantOfShape": ({"add_types": ["INT32"]},
                            "the importer converts any `value` convertDtype takes (INT32, INT64 cast down) "
                            "(" + _SRC_82 + ")"),
        "Pow": ({}, "elementwiseCheck: 'Pow does not support bool or INT32 types' (onnx2trt_utils.cpp @ e9456d57): "
                    "integer Pow is refused, as the row's types say"),
        "ScatterElements": ({}, "native: the importer builds an IScatterLayer (addScatterLayer, kELEMENT); the "
                                "plugin library's ScatterElements plugin (10.x) is never needed here (" + _SRC_82 + ")"),
        "Reciprocal": ({"supported": True, "types": ["FP32", "FP16"]},
                       "operators.md marks it N, but the pinned parser imports it: DEFINE_BUILTIN_OP_IMPORTER(Reciprocal) "
                       "-> unaryHelper(kRECIP), which refuses INT32 and BOOL (" + _SRC_82 + "); Keras LayerNormalization's "
                       "1/sqrt emits it"),
    },
    "onnx_trt_8.5": {
        "ReduceSum": ({"const_inputs": {1: "axes"}},
                      "ReduceSum-13 takes `axes` as an input; reduceTensor asserts it is an initializer "
                      "(onnx2trt_utils.cpp @ 7583da4c)"),
        "ConstantOfShape": ({"add_types": ["INT32"]},
                            "the importer converts any `value` convertDtype takes (INT32, INT64 cast down) "
                            "(" + _SRC_85 + ")"),
        "NonZero": ({"add_types": ["INT32", "BOOL"]},
                    "the importer asserts 'Only FLOAT, HALF, INT32, INT8 or BOOL input is supported' (" + _SRC_85 + ")"),
        "Cast": ({"add_types": ["UINT8"]},
                 "convertDtype maps UINT8 to kUINT8 and the Cast importer casts UINT8 to and from FP32/FP16 only: "
                 "UINT8 is a network input/output type (" + _SRC_85 + ")"),
        "BatchNormalization": ({"attributes": {"training_mode": [0]}},
                               "the importer refuses training_mode=1 (" + _SRC_85 + "); the row does not say so"),
        "Pow": ({}, "elementwiseCheck refuses INT32 for Pow (onnx2trt_utils.cpp @ 7583da4c)"),
        "ScatterElements": ({}, "native: IScatterLayer (" + _SRC_85 + ")"),
    },
    "onnx_trt_10": {
        "NonZero": ({"add_types": ["BF16", "INT32", "INT64", "BOOL"]},
                    "the importer accepts FLOAT, HALF, BF16, INT32, INT64, INT8 and BOOL inputs (" + _SRC_10 + ")"),
        "BatchNormalization": ({"attributes": {"training_mode": [0]}},
                               "the importer refuses training_mode=1 (" + _SRC_10 + "); the row does not say so"),
        "ScatterElements": ({}, "native IScatterLayer without `reduction`; with a reduction the importer uses the "
                                "ScatterElements plugin (v1 in 10.1, v2 from 10.3 per CHANGELOG 10.3.0)"),
    },
}
_REDUCE_WHY = ("reduceTensor checks no type ({}): the row's FP32/FP16 is not what the parser enforces; INT32 "
               "reductions are tf2onnx's shape arithmetic (Keras Flatten's Prod over the shape vector)")
for _name, _src in (("onnx_trt_8.2", "onnx2trt_utils.cpp @ e9456d57"), ("onnx_trt_8.5", "onnx2trt_utils.cpp @ 7583da4c")):
    for _op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                "ReduceProd", "ReduceSum", "ReduceSumSquare"):
        _changes, _why = PARSER[_name].get(_op, ({}, None))
        _changes = dict(_changes, add_types=["INT32"])
        PARSER[_name][_op] = (_changes, _REDUCE_WHY.format(_src) + ("; " + _why if _why else ""))

# Rows the pinned operators.md marks Y that the release tag's table marks N (kept supported, marked unconfirmed).
UNCONFIRMED = {
    "onnx_trt_8.5": {
        op: "supported at the TensorRT 8.5.2 pin 7583da4c (the importer is present); tag release/8.5-GA (3b008c4) "
            "lists it N; whether the JetPack 5.1.x binary parser was built from the pin is unconfirmed"
        for op in ("HardSwish", "Mod", "OneHot")
    },
}
TYPOS = {"initailizer": "initializer", "INF64": "INT64", "`is_traning`": "`training_mode`"}
# "Supported <phrase>: `a`, `b`" -> attribute
_ATTRIBUTE_PHRASES = {"resize transformation modes": "coordinate_transformation_mode", "resize modes": "mode",
                      "nearest modes": "nearest_mode", "aspect ratio policy": "keep_aspect_ratio_policy"}


# ------------------------------------------------------------------------------------ parsing


def parse_markdown(text):
    """(header facts, [row dicts]) of one operators.md."""
    header = {"notes": []}
    rows = []
    for line in text.splitlines():
        line = line.rstrip()
        m = re.search(r"supports operators (?:up to Opset (\d+)|in the inclusive range of opset (\d+) to opset (\d+))",
                      line)
        if m:
            if m.group(1):
                header["opset"] = {"min": None, "max": int(m.group(1))}
                header["opset_statement"] = "up to Opset {}".format(m.group(1))
            else:
                header["opset"] = {"min": int(m.group(2)), "max": int(m.group(3))}
                header["opset_statement"] = "range of opset {} to opset {}".format(m.group(2), m.group(3))
        m = re.match(r"TensorRT supports the following ONNX data types: (.*)$", line)
        if m:
            names = re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group(1).strip().rstrip("."))
            header["data_types"] = [n.strip() for n in names if n.strip()]
        if line.startswith("> Note:"):
            header["notes"].append(re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", line[len("> Note:"):].strip()))
        if not line.startswith("|") or line.startswith("|--") or line.startswith("| Operator"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        op, supported = cells[0], cells[1]
        types = cells[2] if len(cells) > 2 else ""
        restrictions = cells[3] if len(cells) > 3 else ""
        rows.append({"op": op, "supported": supported, "types": types, "restrictions": restrictions})
    return header, rows


def _fix_typos(text, fixed):
    for wrong, right in TYPOS.items():
        if wrong in text:
            text = text.replace(wrong, right)
            fixed.add((wrong, right))
    return text


def sentences(text):
    text = text.replace("\\.", ".").replace("<br />", " ").replace("<br/>", " ").strip()
    if not text:
        return []
    parts = re.split(r"(?<=\.)\s+(?=[A-Z`])", text)
    return [p.strip().rstrip(".").strip() for p in parts if p.strip().rstrip(".").strip()]


def _schema(op):
    import onnx.defs

    try:
        return onnx.defs.get_schema(op)
    except Exception:  # an op ONNX no longer defines (ImageScaler, ...): no names to match
        return None


def structure(op, restriction_sentences):
    """The structured restatements of one op's restriction sentences (only what a rule recognises)."""
    schema = _schema(op)
    inputs = [i.name for i in schema.inputs] if schema else []
    outputs = [o.name for o in schema.outputs] if schema else []
    attributes = dict(schema.attributes) if schema else {}
    out = {}
    for sentence in restriction_sentences:
        m = re.search(r"(\d)D or (\d)D", sentence)
        if m:
            out["spatial_dims"] = [int(m.group(1)), int(m.group(2))]
        m = re.search(r"^(?:Inputs |Weights |Scales )?(.*?)(?: input)? must be (?:an initializer|initializers|a constant tensor)"
                      r"(?: and evaluate to False)?$", sentence)
        if m:
            for name in re.findall(r"`(\w+)`", m.group(1)):
                if name in inputs:
                    out.setdefault("const_inputs", {})[inputs.index(name)] = name
        m = re.search(r"`(\w+)` output tensor unsupported", sentence)
        if m and m.group(1) in outputs:
            out.setdefault("unsupported_outputs", []).append(m.group(1))
        m = re.search(r"Only the first output `(\w+)` is supported", sentence)
        if m and outputs and outputs[0] == m.group(1):
            out["unsupported_outputs"] = outputs[1:]
        m = re.search(r"Input rank must be >=\s*(\d+) & <=\s*(\d+)", sentence)
        if m:
            out["input_rank"] = {"min": int(m.group(1)), "max": int(m.group(2))}
        m = re.search(r"^Output has fixed shape and is padded to \[(.+)\]$", sentence)
        if m:
            out["padded_output"] = "[{}]".format(m.group(1).replace("`", ""))
        m = re.search(r"^Input must be (\d)D input$", sentence)
        if m:
            out["input_rank"] = {"min": int(m.group(1)), "max": int(m.group(1))}
        m = re.search(r"^Supported ([a-z ]+): (.*)$", sentence)
        if m and m.group(1) in _ATTRIBUTE_PHRASES:
            out.setdefault("attributes", {})[_ATTRIBUTE_PHRASES[m.group(1)]] = re.findall(r"`(\w+)`", m.group(2))
        m = re.search(r"^`(\w+)`(?: attribute)? must be (\d+)$", sentence)
        if m and m.group(1) in attributes:
            out.setdefault("attributes", {})[m.group(1)] = [int(m.group(2))]
        m = re.search(r"^`(\w+)` is not supported$", sentence)
        if m and m.group(1) in attributes:
            default = attributes[m.group(1)].default_value
            if default is not None and default.type == default.STRING:
                out.setdefault("attributes", {})[m.group(1)] = [default.s.decode()]
            else:
                out.setdefault("unsupported_attributes", []).append(m.group(1))
        if sentence == "Antialiasing is not supported" and "antialias" in attributes:
            out.setdefault("attributes", {})["antialias"] = [0]
        m = re.search(r"^(.*) attributes are unsupported$", sentence)
        if m:
            names = [n for n in re.findall(r"`(\w+)`", m.group(1)) if n in attributes]
            if names:
                out.setdefault("unsupported_attributes", []).extend(names)
    return out


def _types(cell, fixed):
    cell = _fix_typos(cell, fixed)
    names = [t.strip() for t in cell.split(",") if t.strip()]
    bad = [t for t in names if t not in TYPES]
    if bad:
        raise SystemExit("unknown type name(s) {} in {!r}".format(bad, cell))
    return names


def read_operators_md(reference, file, commit):
    """docs/operators.md at ``commit``: the copy named ``file`` in the folder ``reference``, else ``git show``
    in ``reference`` as a clone of onnx-tensorrt; None when neither has it."""
    copy = Path(reference) / file
    if copy.is_file():
        return copy.read_text(encoding="utf-8")
    res = subprocess.run(["git", "-C", str(reference), "show", "{}:docs/operators.md".format(commit)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return res.stdout.decode("utf-8") if res.returncode == 0 else None


def build_table(name, reference):
    spec = RELEASES[name]
    text = read_operators_md(reference, spec["file"], spec["commit"])
    if text is None:
        raise SystemExit("{}: no {} and no commit {} with docs/operators.md in {} (give a clone of {} or a "
                         "folder of copies)".format(name, spec["file"], spec["commit"], reference, REPO))
    header, rows = parse_markdown(text)
    fixed = set()
    ops = {}
    for row in rows:
        op = row["op"]
        entry = {}
        flag = row["supported"].upper()
        if flag.startswith("N"):
            entry["supported"] = False
        else:
            if "EXPERIMENTAL" in flag:
                entry["experimental"] = True
            types = _types(row["types"], fixed)
            if types:
                entry["types"] = types
            said = sentences(_fix_typos(row["restrictions"], fixed)) if row["restrictions"] != "Restrictions" else []
            if said:
                entry["restrictions"] = said
                entry.update(structure(op, said))
        if op in ops:
            raise SystemExit("{}: {} is listed twice".format(spec["file"], op))
        ops[op] = entry
    corrections = []
    for op, (changes, why) in sorted(PARSER.get(name, {}).items()):
        entry = ops.setdefault(op, {})
        for key, value in changes.items():
            if key == "add_types":
                entry["types"] = list(entry.get("types") or []) + [t for t in value if t not in (entry.get("types") or [])]
            elif key == "const_inputs":
                entry.setdefault("const_inputs", {}).update(value)
            elif key == "attributes":
                entry.setdefault("attributes", {}).update(value)
            else:
                entry[key] = value
        entry.setdefault("notes", []).append("parser: " + why)
        corrections.append(op)
    for op, why in sorted(UNCONFIRMED.get(name, {}).items()):
        ops[op]["unconfirmed"] = why
    ordered = {op: _ordered(ops[op]) for op in sorted(ops, key=lambda o: (o.lower(), o))}
    supported = sum(1 for e in ordered.values() if e.get("supported", True))
    commit = spec["commit"]
    data_types = header["data_types"]
    table = {
        "name": name,
        "description": "ONNX ops the TensorRT {} ONNX parser supports (onnx-tensorrt operators.md at the "
                       "{} pin)".format(spec["tensorrt"], spec["release"]),
        "route": "onnx",
        "op_names": "onnx",
        "tensorrt": spec["tensorrt"],
        "opset": header["opset"],
        "opset_statement": header["opset_statement"],
        "data_types": data_types,
        "io_types": spec["io_types"],
        "cast_down": spec["cast_down"],
        "quantized_types": spec["quantized_types"],
        "io_only_types": spec["io_only_types"],
        "source_commit": commit,
        "unlisted": "unsupported",
        "sources": [
            "{}/blob/{}/docs/operators.md".format(REPO, commit),
            "git: onnx/onnx-tensorrt commit {} path docs/operators.md (the parsers/onnx pin of NVIDIA/TensorRT "
            "tag {})".format(commit, spec["release"]),
            "parser source at the same commit for the corrections in notes: {}/tree/{}".format(REPO, commit),
        ],
        "unconfirmed": [],
        "notes": [
            "Generated by scripts/gen_onnx_trt_tables.py from the operators.md at onnx-tensorrt {} (TensorRT {}); "
            "do not edit by hand".format(commit[:8], spec["release"]),
            "ops: one entry per row; types as the row writes them; restrictions: the row's sentences; const_inputs "
            "(input index: ONNX input name; an initializer or a Constant node's output), spatial_dims, "
            "unsupported_outputs, input_rank, padded_output (the fixed shape a data-dependent output is padded to), "
            "attributes (allowed values), unsupported_attributes restate a sentence for checkers",
            "io_types: the types convertDtype maps (network inputs/outputs); cast_down: types the parser converts "
            "(INT64 weights and inputs to INT32 on 8.x, DOUBLE to FP32); quantized_types: valid only through "
            "QuantizeLinear/DequantizeLinear; io_only_types: valid only as network inputs/outputs",
            "The parser warns below opset 7 ('Models using older opsets are not guaranteed to work', ModelImporter.cpp)",
        ],
        "facts": {
            "source_release": spec["release"],
            "jetpack_note": spec["jetpack"],
            "source_notes": header["notes"],
            "counts": {"listed": len(ordered), "supported": supported, "unsupported": len(ordered) - supported},
        },
        "ops": ordered,
    }
    if corrections:
        table["notes"].append("Where operators.md and the parser source at {} disagree the parser decides; "
                              "corrected from the parser: {} (each op's notes say why)".format(commit[:8],
                                                                                             ", ".join(corrections)))
    if UNCONFIRMED.get(name):
        table["notes"].append("Listed Y at the pin but N at tag release/8.5-GA (3b008c4): {} (marked unconfirmed)".format(
            ", ".join(sorted(UNCONFIRMED[name]))))
    for wrong, right in sorted(fixed):
        table["notes"].append("Typo fixed from the source: {!r} read as {!r}".format(wrong, right))
    if name == "onnx_trt_10":
        table["unconfirmed"].append(
            "This is the onnx-tensorrt 10.1-GA table; JetPack 6.1/6.2 ship TensorRT 10.3, whose pin (62bdde2a) was not "
            "available; 10.3 = this table plus CHANGELOG 10.2/10.3 (GRU and Squeeze importer changes, tensor "
            "`axes` inputs for Slice, ScatterElements updated)")
        upper = read_operators_md(reference, spec["upper"], spec["upper_commit"])
        if upper is not None:
            _, upper_rows = parse_markdown(upper)
            added = sorted(r["op"] for r in upper_rows if r["supported"].upper().startswith("Y")
                           and ordered.get(r["op"], {"supported": False}).get("supported", True) is False)
            table["facts"]["supported_in_10.15_not_in_10.1"] = added
            table["notes"].append("facts.supported_in_10.15_not_in_10.1: rows supported in the 10.15 table "
                                  "(fa5aa9f6, an upper bracket for 10.3) and not in this one")
        else:
            print("{}: no docs/operators.md at {} in {}: facts.supported_in_10.15_not_in_10.1 left out".format(
                name, spec["upper_commit"][:8], reference), file=sys.stderr)
    return table


_ORDER = ("supported", "experimental", "unconfirmed", "types", "restrictions", "const_inputs", "attributes",
          "unsupported_attributes", "unsupported_outputs", "spatial_dims", "input_rank", "padded_output", "notes")


def _ordered(entry):
    return {k: entry[k] for k in _ORDER if k in entry}


# ------------------------------------------------------------------------------------ writing


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def render(table):
    head = ("# Op table {name}: generated from onnx/onnx-tensorrt docs/operators.md @ {commit} (TensorRT {release}).\n"
            "# Generated by scripts/gen_onnx_trt_tables.py; do not edit by hand (regenerate).\n"
            "# Schema: pipeline/targets/optable_schema.py (OpTable, OpSupport); loaded by load_op_table(name).\n").format(
        name=table["name"], commit=table["source_commit"], release=table["facts"]["source_release"])
    text = ""
    for key, value in table.items():
        if key == "ops":
            continue
        prose = key == "facts" or (isinstance(value, list) and any(len(str(v)) > 40 for v in value))
        text += yaml.dump({key: value}, Dumper=_Dumper, sort_keys=False, default_flow_style=None if isinstance(value, (dict, list)) and not prose else False,
                          width=130, allow_unicode=True)
    lines = ["ops:"]
    for op, entry in table["ops"].items():
        flow = yaml.dump({op: entry}, Dumper=_Dumper, sort_keys=False, default_flow_style=True, width=10 ** 6,
                         allow_unicode=True).strip()
        if flow.startswith("{") and flow.endswith("}"):
            flow = flow[1:-1]
        if len(flow) + 2 <= 130:
            lines.append("  " + flow)
        else:
            block = yaml.dump({op: entry}, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=126,
                              allow_unicode=True)
            lines += ["  " + line for line in block.rstrip("\n").splitlines()]
    return head + text + "\n".join(lines) + "\n"


def generate(reference):
    """{file name: text} of every generated table."""
    reference = Path(reference)
    return {name + ".yaml": render(build_table(name, reference)) for name in RELEASES}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True,
                        help="a clone of https://github.com/onnx/onnx-tensorrt, or a folder of operators.md copies "
                             "named as RELEASES says (operators_trt8.2.1.md, ...)")
    parser.add_argument("--out", default=str(OUT), help="where the tables go (targets/ops)")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out; exit 1 when they differ")
    args = parser.parse_args(argv)
    reference = Path(args.reference)
    if not reference.is_dir():
        print("no folder {}: give a clone of {} or a folder of operators.md copies".format(reference, REPO),
              file=sys.stderr)
        return 2
    stale = []
    for name, text in generate(reference).items():
        path = Path(args.out) / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print("wrote", path)
    if stale:
        print("out of date: {} (run python scripts/gen_onnx_trt_tables.py --reference {})".format(
            ", ".join(stale), args.reference), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
