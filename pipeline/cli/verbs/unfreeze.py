"""deploy unfreeze MODEL -o DIR: a frozen graph back to a trainable SavedModel."""

import json

from pipeline.cli.args import add_format, add_trust, add_verb, names


def add_parser(subparsers):
    p = add_verb(subparsers, "unfreeze", run)
    p.add_argument("model", help="a frozen graph (.pb/.pbtxt); its io.json beside it names inputs and outputs")
    p.add_argument("--output", "-o", required=True, help="the SavedModel directory to write (must not exist)")
    p.add_argument("--trainable-scopes", type=names, metavar="SCOPE,...",
                   help="only weights under these name scopes become variables")
    add_format(p, ("text", "json"), help="text (default) or json (every variable, the trainable ones, inputs, "
               "outputs)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_trust(p)


def run(args):
    """Turn a frozen graph's weight constants back into variables: a SavedModel that trains in TF2."""
    from pipeline.progress import Progress
    from pipeline.tf.unfreeze import unfreeze

    progress = Progress("quiet" if args.quiet else "human")
    result = unfreeze(args.model, args.output, args.trainable_scopes or None, progress=progress)
    if args.format == "json":
        print(json.dumps(dict(result, output=str(args.output)), indent=2, sort_keys=True))
        return 0
    print("{}: {} variables, {} trainable ({} ...), input {}, outputs {}".format(
        args.output, len(result["variables"]), len(result["trainable"]), ", ".join(result["variables"][:3]),
        result["inputs"][0], ", ".join(result["outputs"])))
    return 0
