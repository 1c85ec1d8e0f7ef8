#!/usr/bin/env python3
"""Coverage-guided fuzzing of deploy's readers and config loader with atheris (libFuzzer).

    python scripts/fuzz.py readers --seconds 600          # by hand: ten minutes
    python scripts/fuzz.py config --runs 2000 --seed 1    # bounded and repeatable (what the test runs)
    python scripts/fuzz.py runs --seconds 600             # deploy report / compare on a mutated run folder
    python scripts/fuzz.py agent --seconds 60             # the agent's answer line, as the host reads it
    python scripts/fuzz.py records --seconds 60           # one record (run.json, benchmark.json, ...) through its schema

The corpus lives in tests/fuzz/corpus/<target>/ (seeds checked in; new interesting inputs are
added there while fuzzing, so a long run by hand grows it: commit what it adds). A crash is
written to tests/fuzz/crashes/ and the run exits non-zero; turn it into a regression file in
tests/fuzz/regressions/<target>/ (replayed by tests/fuzz/test_fuzz.py every run) and fix it.
Needs `pip install atheris`.
"""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=("readers", "config", "runs", "agent", "records", "bundle"))
    parser.add_argument("--seconds", type=int, help="stop after this many seconds")
    parser.add_argument("--runs", type=int, help="stop after this many inputs")
    parser.add_argument("--seed", type=int, default=0, help="libFuzzer seed (0: random)")
    parser.add_argument("--no-grow", action="store_true", help="don't add new inputs to the checked-in corpus")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    import atheris

    with atheris.instrument_imports(include=["pipeline"]):
        import targets
        import pipeline.config  # noqa: F401  (instrumented before the target imports it)
        import pipeline.config.source  # noqa: F401
        import pipeline.graph.readers  # noqa: F401
        import pipeline.graph.onnx_reader  # noqa: F401
        import pipeline.report  # noqa: F401  (runs: report, compare and the records they read)
        import pipeline.report.collect  # noqa: F401
        import pipeline.report.compare  # noqa: F401
        import pipeline.report.html  # noqa: F401
        import pipeline.report.markdown  # noqa: F401
        import pipeline.report.verdict  # noqa: F401
        import pipeline.records  # noqa: F401
        import pipeline.device.process  # noqa: F401  (agent: the answer line and the client's reading of it)
        import pipeline.device.client  # noqa: F401
        import pipeline.graph.diff.weights  # noqa: F401  (bundle: a SavedModel's variables, read without TensorFlow)

    corpus = ROOT / "tests" / "fuzz" / "corpus" / args.target
    crashes = ROOT / "tests" / "fuzz" / "crashes"
    crashes.mkdir(parents=True, exist_ok=True)
    flags = [sys.argv[0], "-rss_limit_mb=4096", "-timeout=20", "-max_len=65536",
             "-artifact_prefix={}/{}-".format(crashes, args.target), "-print_final_stats=1"]
    if args.seconds:
        flags.append("-max_total_time={}".format(args.seconds))
    if args.runs:
        flags.append("-runs={}".format(args.runs))
    if args.seed:
        flags.append("-seed={}".format(args.seed))
    if args.no_grow:
        import tempfile

        scratch = tempfile.mkdtemp(prefix="deploy-fuzz-corpus-")
        flags += [scratch, str(corpus)]  # new inputs go to the scratch folder; the seeds are read
    else:
        flags.append(str(corpus))
    atheris.Setup(flags, targets.TARGETS[args.target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
