"""deploy report RUN_DIR: a run's report page."""

import sys

from pipeline.cli.args import add_verb, write_or_fail


def add_parser(subparsers):
    p = add_verb(subparsers, "report", run)
    p.add_argument("run_dir", help="a run folder, runs/<run name>")
    p.add_argument("--history", nargs="+", metavar="DIR", help="earlier runs (run folders, or folders of them) for trend plots")
    p.add_argument("--format", default="html", choices=("html", "markdown"), help="html (default) or markdown (CI job summary)")
    p.add_argument("--output", "-o", metavar="FILE", help="where to write it (default RUN_DIR/report.html; markdown: stdout)")
    p.add_argument("--steps", metavar="FILE", help="the CI job's step outcomes as JSON (GitHub Actions: ${{ toJSON(steps) }}, "
                   "or {\"step\": \"success\"}), shown first: a failed step makes the page say JOB FAILED beside the "
                   "figures' verdict; render the report after the last step that can fail")


def run(args):
    """Write a run's report: one self-contained HTML page (or Markdown for a CI job summary)."""
    from pipeline.report import markdown_report, write_report
    from pipeline.report.job import read_steps

    steps = read_steps(args.steps) if args.steps else None
    if args.format == "markdown":
        text = markdown_report(args.run_dir, steps=steps)
        if args.output:
            write_or_fail(args.output, text, "-o")
        else:
            sys.stdout.write(text)
        return 0
    print(write_report(args.run_dir, history=args.history or (), output=args.output, steps=steps))
    return 0
