"""deploy check MODEL... --target T: will a model convert for a Jetson?"""

from pipeline.cli.args import (LazyChoices, add_custom_objects, add_format, add_trust, add_verb, positive,
                               use_custom_objects, write_or_fail)
from pipeline.estimate.summary import GATE_NODES


def add_parser(subparsers):
    p = add_verb(subparsers, "check", run)
    p.add_argument("model", nargs="+", help="frozen .pb/.pbtxt, SavedModel directory, .keras/.h5, TF1 .meta or .onnx; "
                   "several, or a folder (every model in it): one verdict each, then a summary table, exit code the "
                   "worst (1 unreadable > 2 NO > 0)")
    p.add_argument("--target", "-t", required=True, help="a target name (deploy targets) or a target .yaml file")
    p.add_argument("--route", action="append", choices=LazyChoices("pipeline.targets.device", "ROUTES"),
                   metavar="ROUTE", help="check only this route: %(choices)s (repeatable; default: every route "
                   "the target has)")
    add_format(p, help="report format: text, json, markdown (default text)")
    p.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report for CI")
    p.add_argument("--signature", default="serving_default", help="SavedModel signature to check (default serving_default)")
    p.add_argument("--no-convert", dest="convert", action="store_false", default=None,
                   help="predict the onnx route from the tables only; do not run tf2onnx on a frozen graph "
                        "(the report says \"predicted, tf2onnx not run\")")
    p.add_argument("--convert-timeout", type=positive, metavar="SECONDS",
                   help="time limit of the tf2onnx subprocess (default: $DEPLOY_CHECK_CONVERT_TIMEOUT, else 120)")
    p.add_argument("--no-cache", dest="cache", action="store_false",
                   help="check again even when the check cache holds the answer for these bytes (the cache: "
                        "$DEPLOY_CHECK_CACHE_DIR, else ~/.cache/deploy/check; DEPLOY_CHECK_CACHE=0 switches it off)")
    estimate = p.add_mutually_exclusive_group()
    estimate.add_argument("--estimate", dest="estimate", action="store_true", default=None,
                          help="estimate the engine's latency even for a graph over {:,} nodes (it adds seconds)"
                          .format(GATE_NODES))
    estimate.add_argument("--no-estimate", dest="estimate", action="store_false", default=None,
                          help="no latency estimate line (by default: one line, batch 1 at the target's fastest "
                               "precision; never part of the verdict; deploy estimate for the layers)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr (errors only)")
    add_trust(p)  # a Keras Lambda layer's Python code is loaded (and traced) only with it
    add_custom_objects(p)


def run(args):
    """Will this model convert for this Jetson? Offline check against the target's op tables, the onnx route
    on tf2onnx's real output where it is installed. Progress on stderr, the report on stdout."""
    from pipeline.check import zoo
    from pipeline.progress import Progress

    progress = Progress("quiet" if args.quiet else "human")
    use_custom_objects(args)  # opted in: the reader and the converter's workers (child processes) load the user's code
    models = args.model
    single = len(models) == 1 and not zoo.is_zoo(models)
    answers = None
    if args.cache:  # before anything heavy: a re-check of the same bytes answers from here
        from pipeline.check.cache import AnswerCache

        answers = AnswerCache.for_check(args.target, args.route, args.signature, args.convert, predict=True,
                                        timeout=args.convert_timeout)
        report = answers.get(models[0]) if answers is not None and single else None
        if report is not None:
            progress.log("{}: the answer from the check cache (stored {}: same bytes, target tables, tf2onnx and "
                         "deploy; --no-cache checks again)".format(models[0], report.cached["stored"]))
            _add_estimate(args, report, models[0], answers, progress)
            return _single_output(args, report)
    from pipeline.check.checker import start_file_flops  # after the cache: a hit imports no checker

    # a big frozen graph's FLOPs: a child reads it while the rest is imported and the target loaded here
    # (closed by check_model)
    flops = start_file_flops(models[0], args.signature) if single and (not args.route or "tftrt" in args.route) \
        else None
    try:
        from pipeline.check import check_model
        from pipeline.rewrite.predict import predict_rewrite
        from pipeline.targets import load_target

        target = load_target(args.target)
    except BaseException:
        if flops is not None:
            flops.close()
        raise
    options = {"convert": args.convert, "convert_timeout": args.convert_timeout, "predict": predict_rewrite}
    if not single:
        entries = zoo.check_models(models, target, routes=args.route, signature=args.signature, progress=progress,
                                   answers=answers, **options)
        for entry in entries:
            if entry.report is not None:
                _add_estimate(args, entry.report, entry.path, answers, progress)
        print(zoo.FORMATS[args.format](entries))
        if args.junit:
            write_or_fail(args.junit, zoo.format_junit(entries), "--junit")
        return zoo.exit_code(entries)
    report = check_model(models[0], target, routes=args.route, signature=args.signature, outlive=True, flops=flops,
                         progress=progress, **options)
    if answers is not None:
        answers.put(models[0], report)
    _add_estimate(args, report, models[0], answers, progress)
    return _single_output(args, report)


def _add_estimate(args, report, model, answers, progress):
    """``report.estimate``: the latency estimate, made outside the cached answer (kept beside it: pipeline.estimate.
    summary.cached_check_estimate); never changes the verdict."""
    if args.estimate is False:
        return
    import os

    from pipeline.estimate.summary import cached_check_estimate

    nodes = report.model.get("nodes")
    cached = getattr(report, "cached", None)  # answered from the check cache: its entry is named by the answer's key
    key = os.path.splitext(os.path.basename(cached["file"]))[0] if cached and cached.get("file") else None
    with progress.step("{}: estimating the engine's latency (--no-estimate skips it)".format(model)):
        report.estimate = cached_check_estimate(answers, model, args.target, args.signature, nodes, args.estimate, key)


def _single_output(args, report):
    from pipeline.check.report import FORMATS as REPORT_FORMATS, format_junit
    from pipeline.errors import EXIT_NOT_DEPLOYABLE

    print(REPORT_FORMATS[args.format](report, next_step=True) if args.format == "text" else
          REPORT_FORMATS[args.format](report))
    if args.junit:
        write_or_fail(args.junit, format_junit(report), "--junit")
    return 0 if report.deployable else EXIT_NOT_DEPLOYABLE
