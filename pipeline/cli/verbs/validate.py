"""deploy validate CONFIG: check a config without running it."""

import json
import sys

from pipeline.cli.args import add_config, add_format, add_verb
from pipeline.errors import EXIT_BAD_INPUT


def add_parser(subparsers):
    p = add_verb(subparsers, "validate", run)
    add_config(p, help="the YAML config to check, e.g. configs/jetson_tx2.yaml")
    add_format(p, ("text", "json"), help="text (default) or json (config, run, target, stages) for a valid config; "
               "problems go to stderr either way")


def run(args):
    """Check a config (schema, target, paths) without running anything."""
    from pipeline.config import ConfigError, load_config

    try:
        config = load_config(args.config, args.set)
    except ConfigError as e:
        for problem in e.problems:
            print("deploy: error: " + problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    target = config.load_target()
    problems = config.path_problems()
    for problem in problems:
        print("deploy: error: " + problem, file=sys.stderr)
    if problems:
        return EXIT_BAD_INPUT
    if args.format == "json":
        print(json.dumps({"config": str(args.config), "ok": True, "run": config.run.name, "target": target.name,
                          "stages": list(config.selected_stages())}, indent=2))
    else:
        print("{}: ok (run {}, target {}, stages: {})".format(args.config, config.run.name, target.name,
                                                             ", ".join(config.selected_stages())))
    return 0
