"""deploy validate CONFIG: check a config without running it."""

import json
import sys

from pipeline.cli.args import add_config, add_format, add_verb, json_error
from pipeline.errors import EXIT_BAD_INPUT


def add_parser(subparsers):
    p = add_verb(subparsers, "validate", run)
    add_config(p, help="the YAML config to check, e.g. configs/jetson_tx2.yaml")
    add_format(p, ("text", "json"), help="text (default) or json (config, run, target, stages) for a valid config; "
               "problems go to stderr either way, and with json also as {\"error\": {\"message\", \"exit_code\", "
               "\"problems\"}} on stdout")


def run(args):
    """Check a config (schema, target, paths) without running anything: every problem, at once."""
    from pipeline.config import ConfigError, validate_config

    config, target, problems = validate_config(args.config, args.set)
    if problems:
        for problem in problems:
            print("deploy: error: " + problem, file=sys.stderr)
        if args.format == "json":  # the one error shape (cli/args.json_error), every problem listed
            print(json.dumps(json_error(ConfigError(problems[0], problems)), indent=2, sort_keys=True))
        return EXIT_BAD_INPUT
    if args.format == "json":
        print(json.dumps({"config": str(args.config), "ok": True, "run": config.run.name, "target": target.name,
                          "stages": list(config.selected_stages())}, indent=2, sort_keys=True))
    else:
        print("{}: ok (run {}, target {}, stages: {})".format(args.config, config.run.name, target.name,
                                                             ", ".join(config.selected_stages())))
    return 0
