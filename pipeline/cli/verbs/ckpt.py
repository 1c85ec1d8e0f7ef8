"""deploy ckpt inspect|diff: checkpoints and restore reports."""

import json
import sys

from pipeline.cli.args import add_config, add_format, add_group, add_verb, json_error
from pipeline.errors import DeployError


def add_parser(subparsers):
    _, actions = add_group(subparsers, "ckpt", "inspect checkpoints and restore reports", "Checkpoints.",
                           "ckpt_command", "ACTION")
    p = add_verb(actions, "inspect", inspect)
    p.add_argument("checkpoint")
    add_format(p, ("text", "json"), help="text (default: a table) or json (name, shape, dtype, size of each variable)")
    p = add_verb(actions, "diff", diff)
    add_config(p, help="the config whose model (and stages.train scopes) to restore into")
    p.add_argument("checkpoint", nargs="?", help="the checkpoint to restore (required)")
    p.add_argument("--config", dest="config_flag", metavar="CONFIG",
                   help="deprecated: the older order, deploy ckpt diff CHECKPOINT --config CONFIG")
    add_format(p, ("text", "json"), help="text (default: a table) or json (every variable name per kind: restored, "
               "new, unused, shape_mismatch, excluded, ambiguous, trainable)")


def inspect(args):
    """List the variables of a checkpoint, .keras/.weights.h5/.h5 file or frozen graph."""
    from pipeline.train.checkpoints import inspect as read_variables

    rows = read_variables(args.checkpoint)
    if args.format == "json":
        print(json.dumps([{"name": name, "shape": [None if d is None else int(d) for d in shape], "dtype": str(dtype), "size": int(size)}
                          for name, shape, dtype, size in rows], indent=2))
        return 0
    width = max([len(name) for name, _, _, _ in rows] + [4])
    print("{:<{w}}  {:<20}  {:<8}  {}".format("name", "shape", "dtype", "size", w=width))
    for name, shape, dtype, size in rows:
        print("{:<{w}}  {:<20}  {:<8}  {}".format(name, str(tuple(shape)), str(dtype), size, w=width))
    print("{} variables, {} values".format(len(rows), sum(r[3] for r in rows)))
    return 0


def diff(args):
    """The restore report of CHECKPOINT into a config's model, without training."""
    from pipeline.config import load_config
    from pipeline.train.restore import config_restore_report, format_report

    config, checkpoint = _config_and_checkpoint(args)
    report, problem = config_restore_report(load_config(config, args.set), checkpoint)
    if args.format == "json" and problem is not None:  # one document: the report and the error's one shape
        print(json.dumps(dict(json_error(problem), report=report), indent=2, sort_keys=True))
        print("deploy: error: " + problem.message, file=sys.stderr)
        return problem.code
    print(json.dumps(report, indent=2, sort_keys=True) if args.format == "json" else format_report(report))
    if problem is not None:  # deploy run would stop here: say what to do, exit 1
        raise problem
    return 0


def _config_and_checkpoint(args):
    """CONFIG CHECKPOINT, or the deprecated CHECKPOINT --config CONFIG."""
    if args.config_flag is not None:
        if args.checkpoint is not None:
            raise DeployError("deploy ckpt diff: CONFIG given twice (as an argument and as --config); "
                              "use deploy ckpt diff CONFIG CHECKPOINT")
        return args.config_flag, args.config
    if args.checkpoint is None:
        raise DeployError("deploy ckpt diff: the following arguments are required: CHECKPOINT "
                          "(deploy ckpt diff CONFIG CHECKPOINT)")
    return args.config, args.checkpoint
