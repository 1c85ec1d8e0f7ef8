"""deploy data shapes DIR: small generated datasets."""

import json

from pipeline.cli.args import add_format, add_group, add_verb, count


def add_parser(subparsers):
    _, kinds = add_group(subparsers, "data", "make datasets", "Make datasets.", "data_command", "KIND")
    p = add_verb(kinds, "shapes", shapes)
    p.add_argument("dir", help="where to write it (must not exist or be empty)")
    p.add_argument("--size", type=count, default=96, help="image size in pixels (default 96)")
    # the defaults of a config's dataset section (pipeline.config.schema.DatasetSection): the dataset deploy run makes
    p.add_argument("--train-per-class", type=count, default=150, help="training images per class (default 150)")
    p.add_argument("--val-per-class", type=int, default=30, help="validation images per class (default 30)")
    p.add_argument("--seed", type=int, default=0)
    add_format(p, ("text", "json"), help="text (default) or json (classes, image counts, size, path)")


def shapes(args):
    """Generate a small deterministic dataset of drawn shapes (4 classes, train/ and val/)."""
    from pipeline.data.shapes import generate_shapes

    summary = generate_shapes(args.dir, image_size=args.size, train_per_class=args.train_per_class,
                              val_per_class=args.val_per_class, seed=args.seed)
    if args.format == "json":
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return 0
    print("{}: {} classes ({}), {} train / {} val images at {}x{}".format(
        args.dir, len(summary["classes"]), ", ".join(summary["classes"]), summary["train"], summary["val"],
        args.size, args.size))
    return 0
