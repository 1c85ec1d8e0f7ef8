"""What the nightly report says first, as plain data: the gate's verdict (``comparison.json``, written by
``deploy compare -o``), read and put into words. Which commit and config made the run and how noisy its figures were is
pipeline.report.provenance; what the model is (size, parameters, FLOPs, engine settings),
pipeline.report.model_facts.

Everything here reads defensively: ``comparison.json`` may be missing, from an older ``deploy compare``
(``passed``/``notes``/``metric``/``why``) or unreadable; a run may have no record of its commit. What is
not known is said to be unknown, never guessed.
"""

import json
import re
from pathlib import Path

from pipeline import records
from pipeline.errors import DeployError
from pipeline.files import RECORD_BYTES, read_regular

GATE_FILE = "comparison.json"
# "suspect" (one night out of band) and "throttled" (clocks moved: flagged, not judged) are the gate's amber
# verdicts: exit 0, never drawn as a pass nor as a regression (pipeline.report.compare)
VERDICTS = ("pass", "suspect", "throttled", "regression", "not comparable", "no data")
FIGURES = {  # figure key -> (label, unit, lower is better)
    "p50_ms": ("p50 latency", "ms", True),
    "p99_ms": ("p99 latency", "ms", True),
    "throughput_ips": ("throughput", "img/s", False),
    "accuracy": ("accuracy", "", False),
    "consistency": ("batch consistency", "", False),
    "check": ("check", "", False),
}
STATUS_ORDER = ("regression", "suspect", "not compared", "noise", "improved", "ok")


# ---------------------------------------------------------------- the gate's verdict (contract A)

def find_gate(run_dir, explicit=None):
    """The comparison.json of ``run_dir``: ``explicit`` when given, else ``<run>/comparison.json``, else a
    ``comparison.json`` beside the run folder whose ``current`` names this run; None when there is none."""
    if explicit:
        return Path(explicit)
    run_dir = Path(run_dir)
    inside = run_dir / GATE_FILE
    if inside.is_file():
        return inside
    beside = run_dir.parent / GATE_FILE
    if beside.is_file():
        try:  # only which run it names; load_gate reads it through the gate's schema
            current = json.loads(read_regular(beside, "a gate file", RECORD_BYTES)).get("current")
        except (OSError, ValueError, AttributeError, DeployError):
            return None
        names = _names(current)
        if run_dir.name in names or str(run_dir) in names or str(run_dir.resolve()) in names:
            return beside
    return None


def _names(current):
    if isinstance(current, str):
        return {current, Path(current).name}
    if isinstance(current, dict):
        out = set()
        for key in ("dir", "name", "run", "path"):
            if current.get(key):
                out |= {str(current[key]), Path(str(current[key])).name}
        return out
    return set()


def load_gate(path):
    """The gate's verdict from ``path``, normalized (see ``normalize``); a file that cannot be read is a
    "no data" verdict that says why (the page must never look like a pass because of it)."""
    if path is None:
        return None
    try:  # through the gate's schema (records), like every file deploy writes: rows, reference, current
        raw = records.read(path, "comparison")
    except DeployError as e:
        return {"verdict": "no data", "reasons": [e.message], "rows": [], "reference": {}, "hardware": {},
                "baseline": None, "path": str(path), "unreadable": True}
    if raw is None:
        return None
    gate = normalize(raw)
    gate["path"] = str(path)
    return gate


def gate_for(run, run_dir, explicit=None):
    """The gate's verdict for a loaded run: ``explicit`` file, else what load_run put in ``run["gate"]`` (if
    collect loads it), else the file find_gate finds; None when the run was not compared. A comparison
    that judged an earlier benchmark than the run's carries ``stale`` (why), see ``stale_reason``."""
    if not explicit and isinstance(run.get("gate"), dict):
        gate = normalize(run["gate"])
    else:
        gate = load_gate(find_gate(run_dir, explicit))
    if gate is not None and not gate.get("unreadable"):
        gate["stale"] = stale_reason(gate, run)
    return gate


def stale_reason(gate, run):
    """Why ``gate`` is not the verdict on the run's benchmark as it is now, or None.

    comparison.json names what it judged under ``current``: the benchmark file's sha256
    (``benchmark_sha256``, or ``benchmark.sha256``) where the compare wrote one, else when the judged run
    finished (``when``). The first is compared with benchmark/benchmark.json's bytes; the second with when
    the benchmark now in the folder was made (its manifest's ``started``): a benchmark made after the
    judged run finished is not the one judged (a re-run of deploy run that only reuses the benchmark
    keeps its figures, and its comparison stays current). Nothing to compare with: None (not known stale)."""
    current = gate.get("current") if isinstance(gate.get("current"), dict) else {}
    bench_file = Path(run.get("dir") or ".") / "benchmark" / "benchmark.json"
    named = current.get("benchmark")
    judged = current.get("benchmark_sha256") or (named.get("sha256") if isinstance(named, dict) else None)
    if judged:
        if not bench_file.is_file():
            return "it judged a benchmark (sha256 {}…) this run folder no longer holds".format(str(judged)[:12])
        import hashlib

        now = hashlib.sha256(bench_file.read_bytes()).hexdigest()
        if now != str(judged):
            return "it judged another benchmark (sha256 {}…; benchmark.json now {}…)".format(str(judged)[:12], now[:12])
        return None
    when, made = parse_stamp(current.get("when")), parse_stamp(_benchmark_made(run))
    if when is not None and made is not None and made > when:
        return "it judged the run that finished {}; this run's benchmark was made {}, after it".format(
            current["when"], _benchmark_made(run))
    return None


def _benchmark_made(run):
    made = next((s.get("made") for s in run.get("stages") or [] if s.get("name") == "benchmark" and s.get("made")), None)
    if made:
        return made
    try:
        manifest = json.loads((Path(run.get("dir") or ".") / "benchmark" / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest.get("started") if isinstance(manifest, dict) else None


def parse_stamp(text):
    """A record's time stamp (2026-11-27T22:56:27+0000, ISO 8601) as an aware datetime, else None."""
    from datetime import datetime, timezone

    if not isinstance(text, str) or not text:
        return None
    for parse in (lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%S%z"), datetime.fromisoformat):
        try:
            stamp = parse(text)
        except ValueError:
            continue
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    return None


def normalize(raw):
    """{"verdict", "reasons", "rows", "reference", "hardware", "baseline", "current", "schema"} from a
    comparison.json of contract A (``deploy.comparison/2``) or of the older compare (``passed``, ``notes``,
    rows with ``metric``/``verdict``/``why``)."""
    rows = [_row(r) for r in raw.get("rows") or [] if isinstance(r, dict)]
    reasons = [str(r) for r in (raw.get("reasons") or raw.get("notes") or []) if r]
    notes = [str(n) for n in raw.get("notes") or [] if n and raw.get("reasons") and str(n) not in reasons] \
        if isinstance(raw.get("notes"), list) else []
    verdict = raw.get("verdict")
    if verdict not in VERDICTS:
        if verdict is not None:
            reasons.insert(0, "comparison.json says {!r}, which is not a verdict deploy knows".format(verdict))
            verdict = "no data"
        elif "passed" in raw:  # the compare before contract A
            verdict = "pass" if raw["passed"] else "regression"
        else:
            verdict = "no data"
            reasons.insert(0, "comparison.json holds no verdict")
    if verdict == "pass" and rows and not any(r["status"] not in ("not compared", "missing") for r in rows):
        verdict = "no data"  # a comparison that compared no figure is never a pass
        reasons.insert(0, "no figure was compared (comparison.json said pass)")
    if verdict == "no data" and not rows and not reasons:
        reasons.append("the comparison compared no figure")
    return {"schema": raw.get("schema"), "verdict": verdict, "reasons": reasons, "notes": notes, "rows": rows,
            "reference": raw.get("reference") if isinstance(raw.get("reference"), dict) else {},
            "hardware": raw.get("hardware") if isinstance(raw.get("hardware"), dict) else {},
            "baseline": raw.get("baseline"), "current": raw.get("current"), "tolerance": raw.get("tolerance")}


def _row(r):
    figure, batch = r.get("figure"), r.get("batch_size")
    if figure is None and r.get("metric"):  # "p50 b1 (ms)", "throughput b8 (img/s)", "engine top-1 agreement"
        metric = str(r["metric"])
        m = re.match(r"(p50|p99|throughput)\s+b(\d+)", metric)
        if m:
            figure = {"p50": "p50_ms", "p99": "p99_ms", "throughput": "throughput_ips"}[m.group(1)]
            batch = int(m.group(2))
        else:
            figure = metric
    status = r.get("status") or r.get("verdict") or "not compared"
    if status == "missing":
        status = "not compared"
    return {"figure": figure, "label": str(r["label"]) if r.get("label") else None, "batch_size": batch, "baseline": _num(r.get("baseline")), "current": _num(r.get("current")),
            "reference": _num(r.get("reference")), "band": _pair(r.get("band")),
            "interval": _pair(r.get("interval") or r.get("interval_current")), "change": _num(r.get("change")),
            "status": status, "note": str(r.get("note") or r.get("why") or ""),
            "raw_baseline": r.get("baseline"), "raw_current": r.get("current")}


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _pair(v):
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_num(x) is not None or x is None for x in v):
        return [v[0], v[1]]
    return None


def figure_label(row):
    """"p50 latency", "throughput", …; a figure without a batch size by the gate's own label ("engine top-1
    agreement") when it gives one."""
    label, _, _ = FIGURES.get(row["figure"], (str(row["figure"]), "", False))
    if row.get("batch_size") is None and row.get("label"):
        return row["label"]
    return label


def figure_unit(figure):
    return FIGURES.get(figure, ("", "", False))[1]


def sorted_rows(rows):
    """Regressions first, then suspect figures, what was not compared, noise, improvements, the rest (stable)."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(rows, key=lambda r: rank.get(r["status"], len(STATUS_ORDER)))


def headline(gate):
    """One sentence: the verdict and its first why."""
    verdict = gate["verdict"]
    bad = [r for r in gate["rows"] if r["status"] == "regression"]
    if verdict == "regression":
        worst = ", ".join(_what(r) for r in sorted_rows(bad)[:3]) + (" …" if len(bad) > 3 else "")
        return "{} figure{} worse than the reference{}".format(
            len(bad) or "some", "" if len(bad) == 1 else "s", ": " + worst if worst else "")
    if verdict == "pass":
        compared = [r for r in gate["rows"] if r["status"] != "not compared"]
        return "no figure worse than the reference ({} compared)".format(len(compared))
    return gate["reasons"][0] if gate["reasons"] else ("not comparable with the reference" if verdict == "not comparable"
                                                       else "no figure was compared")


def other_reasons(gate):
    """The reasons the headline does not already say (the gate's own "N regressions: …" is the headline)."""
    head = headline(gate)
    return [r for r in gate["reasons"] if r != head and not (gate["verdict"] == "regression"
                                                             and re.match(r"\d+ regressions?: ", r))]


def _what(r):
    where = " at batch {}".format(r["batch_size"]) if r["batch_size"] is not None else ""
    change = "" if r["change"] is None else " " + change_text(r)
    return "{}{}{}".format(figure_label(r), where, change)


def change_text(r):
    """A row's change: relative (%) for latency and throughput, absolute for the rest."""
    if r["change"] is None:
        return "–"
    if r["figure"] in ("p50_ms", "p99_ms", "throughput_ips"):
        return "{:+.1%}".format(r["change"])
    return "{:+.3g}".format(r["change"])


def reference_sentence(gate):
    """What the figures were compared with: the median of N nights on the baseline's fingerprint."""
    ref = gate.get("reference") or {}
    base = gate.get("baseline")
    parts = []
    nights = ref.get("nights")
    if nights is not None:
        failed = ref.get("failed_nights") or 0
        parts.append("the median of {} night{} on the baseline's fingerprint{}".format(
            nights, "" if nights == 1 else "s", " ({} failed, flagged and kept in the band)".format(failed) if failed else ""))
    if base:
        name = base if isinstance(base, str) else (base.get("name") or base.get("dir") or base.get("run"))
        when = None if isinstance(base, str) else (base.get("when") or base.get("finished"))
        if name:
            parts.append("baseline {}{}".format(Path(str(name)).name, " ({})".format(str(when)[:10]) if when else ""))
    if gate.get("tolerance") is not None:
        try:
            parts.append("tolerance {:.0%}".format(float(gate["tolerance"])))
        except (TypeError, ValueError):
            pass
    return "; ".join(parts)
