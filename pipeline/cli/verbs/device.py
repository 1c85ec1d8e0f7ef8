"""deploy device probe CONFIG: the device of a config."""

import json

from pipeline.cli.args import add_config, add_format, add_group, add_verb


def add_parser(subparsers):
    _, actions = add_group(subparsers, "device", "talk to the device of a config", "The device (config's device:).",
                           "device_command", "ACTION")
    p = add_verb(actions, "probe", probe)
    add_config(p, help="the YAML config whose device: section to use")
    add_format(p, ("text", "json"), help="text (default) or json (the whole probe)", json_alias=True)
    p.add_argument("--strict", action="store_true", help="exit 5 when this machine is not the config's target (another "
                   "board, not a Jetson, or another TensorRT)")


def probe(args):
    """The device's identity (board, L4T/JetPack, TensorRT, CUDA, power mode, clocks) and the target it matches."""
    from pipeline.config import load_config
    from pipeline.device.identify import format_probe, probe_report
    from pipeline.errors import EXIT_DEVICE

    report = probe_report(load_config(args.config, args.set))
    print(json.dumps(report, indent=2, sort_keys=True) if args.format == "json" else format_probe(report))
    # --strict: exit 5 (EXIT_DEVICE, what `deploy run` exits with on a board whose TensorRT is not the target's)
    # when this machine is not the config's target: another board, no Jetson at all, or another TensorRT
    return EXIT_DEVICE if report["not_target"] and args.strict else 0
