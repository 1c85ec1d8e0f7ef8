"""deploy schema: the JSON Schema of a config file."""

import json

from pipeline.cli.args import add_verb


def add_parser(subparsers):
    add_verb(subparsers, "schema", run)


def run(args):
    """Print the JSON Schema of a config file (point your editor's YAML plugin at it)."""
    from pipeline.config import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
    return 0
