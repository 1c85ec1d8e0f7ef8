"""deploy estimate: how fast the TensorRT engine would run on a Jetson, offline, with a range."""

import json

from pipeline.cli.args import add_format, add_verb


def add_parser(subparsers):
    p = add_verb(subparsers, "estimate", run)
    p.add_argument("model", nargs="?", help="a frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx")
    p.add_argument("--target", action="append", default=[], metavar="TARGET",
                   help="a board with estimate facts, e.g. jetson_nano (repeatable)")
    p.add_argument("--precision", default="fp16", choices=("fp32", "fp16", "int8"), help="engine precision (default fp16)")
    p.add_argument("--batch", action="append", type=_batch, default=[], metavar="N",
                   help="batch size (repeatable; default 1)")
    p.add_argument("--input-shape", action="append", type=_input_shape, default=[], metavar="NAME=D,D,...",
                   help="a fixed shape for an input the model leaves open, e.g. input=1,224,224,3")
    p.add_argument("--signature", default="serving_default", help="SavedModel signature (default serving_default)")
    p.add_argument("--calibrate", nargs="+", metavar="RUN_FOLDER",
                   help="refit the measured board's parameters from these runs' benchmark.json (TensorRT on the "
                        "board only) into your own file ($DEPLOY_ESTIMATE_DIR or ~/.config/deploy/estimate)")
    add_format(p, ("text", "json", "markdown"))


def _batch(text):
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65536:
        raise argparse.ArgumentTypeError("{!r} is not a batch size (a whole number from 1 to 65536)".format(text))
    return value


def _input_shape(text):
    import argparse

    name, _, dims = text.rpartition("=")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        shape = []
    if not name or not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError("{!r}: expected NAME=D,D,... with positive whole numbers, e.g. "
                                         "input=1,224,224,3".format(text))
    return name, shape


def run(args):
    """Estimate the TensorRT engine's latency per Jetson offline (no TensorRT, no board), with a range."""
    from pipeline.errors import DeployError

    if args.calibrate:
        from pipeline.estimate.runs import calibrate

        for target, path, params, points in calibrate(args.calibrate):
            print("{}: refitted on {} measurement(s) -> {} (eff_conv {:.3g}, eff_other {:.3g}, eff_mem {:.3g}, "
                  "launch {:.3g} us); later estimates for {} use it".format(
                      target, points, path, params.eff_conv, params.eff_other, params.eff_mem, params.launch_us, target))
        if not args.model:
            return 0
    if not args.model:
        raise DeployError("deploy estimate: give a MODEL (or --calibrate RUN_FOLDER...)")
    if not args.target:
        raise DeployError("deploy estimate: give --target, e.g. --target jetson_nano (deploy targets lists them)")
    from pipeline import records
    from pipeline.estimate import estimate_model
    from pipeline.estimate.report import format_markdown, format_text

    report = estimate_model(args.model, args.target, args.precision, args.batch or [1], dict(args.input_shape) or None,
                            args.signature, outlive=True)  # the graph lives to the exit, freed with the process
    if args.format == "json":
        report["schema"] = records.schema_of("estimate")
        records.check(report, "estimate", "deploy estimate")
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(format_markdown(report) if args.format == "markdown" else format_text(report))
    return 0
