"""deploy run CONFIG: the stages of a config."""

import sys

from pipeline.cli.args import add_config, add_custom_objects, add_trust, add_verb, use_custom_objects
from pipeline.errors import DeployError

ALL_STAGES = "__all__"  # --force with no stage


def add_parser(subparsers):
    p = add_verb(subparsers, "run", run)
    add_config(p)
    p.add_argument("--force", nargs="?", const=ALL_STAGES, action="append", metavar="STAGE",
                   help="rerun STAGE even if cached (all stages when no STAGE is given; repeatable)")
    p.add_argument("--from", dest="from_stage", metavar="STAGE", help="start at STAGE (earlier stages must be cached)")
    p.add_argument("--until", metavar="STAGE", help="stop after STAGE")
    p.add_argument("--only", metavar="STAGE", help="run STAGE alone (earlier stages must be cached)")
    p.add_argument("--keep-going", action="store_true", help="after a failed stage, run the stages that do not depend on it")
    p.add_argument("--no-report", action="store_true", help="do not write <run dir>/report.html at the end")
    add_trust(p)  # also: a Keras model's Lambda layers are loaded (their Python code runs), as deploy check loads them
    add_custom_objects(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    out.add_argument("--format", default="text", choices=("text", "json"),
                     help="text (default: progress on stderr, the summary table on stdout) or json (machine-readable "
                          "events, one JSON object per line on stdout)")
    out.add_argument("--json", dest="format", action="store_const", const="json",
                     help="deprecated: the same as --format json")
    p.set_defaults(json_events=True)  # with --format json a DeployError is the one error shape with "event": "error"


def run(args):
    """Run the stages of a config: train, export, freeze, check, rewrite, convert, engine, benchmark."""
    from pipeline.config import load_config
    from pipeline.progress import Progress
    from pipeline.runner import format_summary, run as run_stages

    use_custom_objects(args)
    as_json = args.format == "json"
    progress = Progress("json" if as_json else "quiet" if args.quiet else "human")
    config = load_config(args.config, args.set)
    target = config.load_target()
    force = [f for f in (args.force or []) if f != ALL_STAGES]
    progress.log("deploy run {} -> {}/{} (target {})".format(args.config, config.run.dir, config.run.name, target.name))
    report = run_stages(config, target, force=force, force_all=ALL_STAGES in (args.force or []),
                        from_stage=args.from_stage, until=args.until, only=args.only, keep_going=args.keep_going,
                        progress=progress)
    report_path = None if args.no_report else _write_run_report(report.run_dir)
    if as_json:
        progress.event("summary", run_dir=str(report.run_dir), exit_code=report.exit_code,
                       stages=[vars(s) for s in report.stages], report=report_path and str(report_path))
    elif not args.quiet:  # the result: on stdout, after the progress lines on stderr
        sys.stderr.flush()
        print("\n" + format_summary(report))
        if report_path:
            print("report: {}".format(report_path))
        sys.stdout.flush()
    for s in report.stages:  # the errors last: the line a user (or CI log) reads first
        if s.status == "failed":
            print("deploy: error: stage {}: {}".format(s.name, s.message), file=sys.stderr)
    return report.exit_code


def _write_run_report(run_dir):
    """The HTML report at the end of every run, or None: a report that cannot be written is a warning,
    never a failed run."""
    from pipeline.report import write_report

    try:
        return write_report(run_dir)
    except DeployError as e:
        print("deploy: warning: no report: {}".format(e.message), file=sys.stderr)
        return None
