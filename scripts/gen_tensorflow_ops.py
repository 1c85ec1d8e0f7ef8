#!/usr/bin/env python3
"""Write targets/ops/tensorflow_ops.yaml: every op TensorFlow registers (to tell custom ops apart),
and which of them TensorFlow marks stateful (the screen for untrusted graphs starts from that).

    python scripts/gen_tensorflow_ops.py

`deploy check` reads frozen graphs without TensorFlow; an op missing from this list is one that
this TensorFlow cannot load: a custom op (needs its library) or one from another TF version.
"""

import datetime
import os
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "targets" / "ops" / "tensorflow_ops.yaml"


def parse_args(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="writes {}".format(OUT))
    return parser.parse_args(argv)


def main():
    parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    buf = c_api.TF_GetAllOpList()
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(c_api.TF_GetBuffer(buf))
    names = sorted({op.name for op in op_list.op})
    stateful = sorted({op.name for op in op_list.op if op.is_stateful})
    lines = [
        "# Every op registered by TensorFlow {} (generated; do not edit by hand).".format(tf.__version__),
        "# Regenerate: python scripts/gen_tensorflow_ops.py",
        "tensorflow: '{}'".format(tf.__version__),
        "generated: '{}'".format(datetime.date.today().isoformat()),
        "generated_by: python scripts/gen_tensorflow_ops.py",
        "count: {}".format(len(names)),
        "ops:",
    ]
    lines += ["- {}".format(n) for n in names]
    lines += ["# OpDef.is_stateful: the op has effects beyond its outputs or is not a pure function of its",
              "# inputs (random ops, variables, queues, file and summary writers, ...)",
              "stateful_count: {}".format(len(stateful)), "stateful:"]
    lines += ["- {}".format(n) for n in stateful]
    OUT.write_text("\n".join(lines) + "\n")
    print("{}: {} ops".format(OUT, len(names)))


if __name__ == "__main__":
    main()
