#!/usr/bin/env python3
"""Write targets/ops/onnxruntime_cpu.yaml: the ONNX ops ONNX Runtime's CPU execution provider
runs, read from the installed onnxruntime's kernel registry (plus the ops ONNX defines as a
function of other ops, which ONNX Runtime expands, and Constant).

    python scripts/gen_onnxruntime_table.py

The host_cpu target's onnx route checks against it: `deploy check model --target host_cpu` says
whether ONNX Runtime on this machine runs the model (standard ONNX domain only; contrib ops of
com.microsoft are listed under facts).
"""

import datetime
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "targets" / "ops" / "onnxruntime_cpu.yaml"
_OPEN = 2147483647


def parse_args(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="writes {}".format(OUT))
    return parser.parse_args(argv)


def main():
    parse_args()
    import onnxruntime
    from onnxruntime.capi import _pybind_state as C

    kernels = [k for k in C.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"]
    since = {}
    for k in kernels:
        if k.domain in ("", "ai.onnx"):
            since[k.op_name] = min(since.get(k.op_name, _OPEN), k.version_range[0])
    contrib = sorted({k.op_name for k in kernels if k.domain == "com.microsoft"})
    # ops without a kernel that ONNX Runtime expands into their ONNX function body (CastLike,
    # HardSwish, Mish, ...), and Constant, which becomes an initializer
    import onnx

    expanded = {}
    for schema in onnx.defs.get_all_schemas():
        if schema.domain == "" and schema.name not in since and (schema.has_function or schema.has_context_dependent_function):
            expanded[schema.name] = schema.since_version
    lines = [
        "# Op table onnxruntime_cpu: the ONNX ops ONNX Runtime {}'s CPU execution provider has kernels for.".format(
            onnxruntime.__version__),
        "# Generated; do not edit by hand. Regenerate: python scripts/gen_onnxruntime_table.py",
        "name: onnxruntime_cpu",
        "description: ONNX ops ONNX Runtime's CPU execution provider runs (kernel registry of onnxruntime {})".format(
            onnxruntime.__version__),
        "route: onnx",
        "op_names: onnx",
        "applies_to: onnxruntime {} CPUExecutionProvider".format(onnxruntime.__version__),
        "opset: {{min: 7, max: {}}}".format(max(since.values())),
        "opset_statement: ONNX Runtime runs opset 7 and higher; max is the newest opset a CPU kernel starts at",
        "unlisted: unsupported",
        "sources:",
        "- 'onnxruntime.capi._pybind_state.get_all_opkernel_def() of onnxruntime {} (provider CPUExecutionProvider, "
        "domain ai.onnx)'".format(onnxruntime.__version__),
        "notes:",
        "- 'each op notes the first opset a CPU kernel of it exists for'",
        "- 'generated {} by scripts/gen_onnxruntime_table.py'".format(datetime.date.today().isoformat()),
        "facts:",
        "  onnxruntime: '{}'".format(onnxruntime.__version__),
        "  contrib_ops_com_microsoft: [{}]".format(", ".join(contrib)),
        "ops:",
    ]
    notes = {op: "CPU kernel since opset {}".format(v) for op, v in since.items()}
    notes.update({op: "no kernel: expanded into its ONNX function (since opset {})".format(v) for op, v in expanded.items()})
    notes["Constant"] = "becomes an initializer"
    for op in sorted(notes):
        lines.append("  {}: {{notes: ['{}']}}".format(op, notes[op]))
    OUT.write_text("\n".join(lines) + "\n")
    print("{}: {} ops".format(OUT, len(notes)))


if __name__ == "__main__":
    main()
