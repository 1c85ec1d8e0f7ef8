"""deploy targets [NAME]: the devices deploy knows."""

import json

from pipeline.cli.args import add_format, add_verb


def add_parser(subparsers):
    p = add_verb(subparsers, "targets", run)
    p.add_argument("name", nargs="?", help="a target name, e.g. jetson_tx2")
    add_format(p, ("text", "json"), help="text (default) or json (every field of the target file, validated)")


def run(args):
    """List the devices deploy knows, or show one."""
    from pipeline.targets import all_targets, describe_target, format_target_list, load_target

    if args.format == "json":
        found = load_target(args.name) if args.name else all_targets()
        as_data = found.model_dump(mode="json") if args.name else [t.model_dump(mode="json") for t in found]
        print(json.dumps(as_data, indent=2, sort_keys=True))
    elif args.name:
        print(describe_target(load_target(args.name)))
    else:
        print(format_target_list(all_targets()))
    return 0
