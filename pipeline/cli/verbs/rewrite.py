"""deploy rewrite MODEL --target T -o OUT: apply rewrite passes until the model converts."""

import json

from pipeline.cli.args import add_atol, add_format, add_trust, add_verb, count, named_dims, names, node_dims, refuse
from pipeline.errors import DeployError

# flags that only mean something for a TensorFlow graph: refused for an .onnx model, never ignored
TF_ONLY = (("--checkpoint", "checkpoint"), ("--reference", "reference"), ("--dataset", "dataset"),
           ("--input-shape", "input_shape"), ("--cut", "cut"), ("--outputs", "outputs"))


def _pass_help():
    from pipeline.rewrite import KINDS, registry

    return "a pass to apply, in order (repeatable). " + ". ".join(
        "{}: {}".format(KINDS[kind].split()[0], ", ".join(registry(kind))) for kind in KINDS)


def _lazy_help(action, make):
    """Give ``action`` a help text made only when help is shown (``make`` may import heavy modules)."""
    action.__class__ = type(type(action).__name__, (type(action),), {"help": property(lambda self: make())})
    return action


def add_parser(subparsers):
    p = add_verb(subparsers, "rewrite", run)
    p.add_argument("model", help="a frozen TensorFlow graph (.pb/.pbtxt) or an .onnx model")
    p.add_argument("--target", "-t", required=True, help="the target the graph must convert for")
    p.add_argument("--output", "-o", required=True, help="where to write the rewritten graph (*.pb); "
                   "*.io.json and *.rewrite.json (the receipt) go beside it")
    _lazy_help(p.add_argument("--pass", dest="passes", action="append", metavar="NAME"), _pass_help)
    p.add_argument("--auto", action="store_true", help="apply every pass deploy check names as a fix, check again, repeat")
    p.add_argument("--samples", type=count, default=4, help="samples per numeric check (default 4). The checks "
                   "feed a TensorFlow graph NHWC images (--dataset or random pixels), integer token ids below the "
                   "vocabulary of the embedding they feed, or normal values for float sequences (unknown lengths: "
                   "16); a graph with a fixed batch gets that many at a time; other inputs are not compared, and "
                   "the receipt says why")
    add_atol(p, 1e-4, "a pass may change the outputs by at most this")
    add_format(p, ("text", "json"), help="text (default) or json (the verdict, the receipt's passes, the files written)")
    tf = p.add_argument_group("TensorFlow graphs only", "refused for an .onnx model")
    tf.add_argument("--checkpoint", help="training checkpoint holding batch norm moving statistics (bn_inference)")
    tf.add_argument("--reference", help="an inference-mode frozen graph to compare behaviour-changing passes against")
    tf.add_argument("--dataset", help="image folder for the numeric checks (default: seeded random pixels)")
    tf.add_argument("--input-shape", type=named_dims, metavar="[INPUT=]DIMS",
                    help="set_input_shape option, e.g. input=1,224,224,3")
    tf.add_argument("--cut", type=node_dims, action="append", metavar="NODE[=DIMS]",
                    help="cut option: make NODE a new input (repeatable)")
    tf.add_argument("--outputs", type=names, metavar="NODE,...",
                    help="the graph's outputs (default: MODEL's .io.json, else its sink nodes)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_trust(p)


def pass_options(checkpoint=None, input_shape=None, cut=None):
    """The passes' options from the flags: {pass name: {option: value}}."""
    options = {"bn_inference": {"checkpoint": checkpoint} if checkpoint else {}}
    if input_shape:
        name, shape = input_shape
        options["set_input_shape"] = {"input": name, "shape": shape}
    if cut:
        options["cut"] = {"inputs": dict(cut)}
    return options


def run(args):
    """Make a frozen graph deployable: apply rewrite passes, check the numbers after each, check again."""
    from pipeline.check.report import recommendation
    from pipeline.progress import Progress
    from pipeline.rewrite.command import check_output, exit_code, rewrite_model, rewrite_onnx, write_onnx_outputs, write_outputs
    from pipeline.rewrite.engine import format_pass
    from pipeline.targets import load_target

    if not args.passes and not args.auto:
        raise DeployError("deploy rewrite: name passes with --pass NAME (repeatable) or use --auto")
    onnx = str(args.model).endswith(".onnx")
    if onnx:
        refuse([(flag, getattr(args, dest)) for flag, dest in TF_ONLY],
               "only for a TensorFlow graph; {} is an ONNX model".format(args.model))
    target = load_target(args.target)
    progress = Progress("quiet" if args.quiet else "human")
    if onnx:
        model, summary, report = rewrite_onnx(args.model, target, pass_names=args.passes or (), auto=args.auto,
                                              options={}, samples=args.samples, tolerance=args.atol,
                                              progress=progress)
        write_onnx_outputs(model, summary, args.output)
        receipt = str(args.output)[:-5] + ".rewrite.json"
    else:
        check_output(args.output)  # before any pass runs
        graph, io, summary, report = rewrite_model(
            args.model, target, pass_names=args.passes or (), auto=args.auto,
            options=pass_options(args.checkpoint, args.input_shape, args.cut), reference=args.reference,
            dataset=args.dataset, samples=args.samples, tolerance=args.atol, progress=progress,
            outputs=args.outputs or None)
        write_outputs(graph, io, summary, args.output)
        receipt = args.output[:-3] + ".rewrite.json"
    if args.format == "json":
        print(json.dumps({"model": str(args.model), "target": target.name, "output": str(args.output),
                          "receipt": receipt, "deployable": report.deployable, "recommendation": recommendation(report),
                          "inputs": summary.get("inputs"), "nodes": summary["nodes"], "passes": summary["passes"],
                          "check_before": summary["check_before"], "check_after": summary["check_after"]},
                         indent=2, sort_keys=True, default=str))
    else:  # the receipt in short (stderr has only the progress of steps that run long)
        if summary.get("inputs"):
            print("numeric checks: {}".format(summary["inputs"]))
        for entry in summary["passes"]:
            print(format_pass(entry))
        print("wrote {} ({} -> {} nodes); receipt {}".format(
            args.output, summary["nodes"]["before"], summary["nodes"]["after"], receipt))
        print("after rewrite: {} — {}".format("YES" if report.deployable else "NO", recommendation(report)))
    return exit_code(report)
