"""Where a run came from, as plain data: the commit and config that made it (``provenance``) and how noisy
its figures were (``noise_notes``). Reads defensively: what is not known is said to be unknown, never guessed.
What measured it (the fingerprint, whether the figures are the host's) is pipeline/report/machine.py's, the
one reading the gate, the device and the pages share."""

import hashlib
import json
import re
from pathlib import Path


NOISY_P99_RATIO = 2.0  # p99 more than twice the median: the spread is as wide as the median itself
NOISY_MEAN_RATIO = 1.5  # mean 1.5x the median: a few very slow calls (or two modes) carry the mean
NOISY_INTERVAL = 0.10  # the p50's 95 % interval wider than 10 % of it


# ---------------------------------------------------------------- provenance

_NIGHT = re.compile(r"-([0-9a-f]{7,40})-\d+(?:\.\d+)?$")


def provenance(run):
    """{"commit", "commit_source", "config_digest", "digest_source", "ci"}: which commit and config made the run."""
    record = run.get("record") or {}
    env = record.get("env") if isinstance(record.get("env"), dict) else {}
    git = record.get("git") if isinstance(record.get("git"), dict) else {}
    commit, source = None, None
    for value, where in ((record.get("commit"), record.get("commit_source") or "run.json"),
                         (git.get("commit") or git.get("sha"), "run.json (git)"),
                         (record.get("github_sha") or record.get("GITHUB_SHA") or env.get("GITHUB_SHA"), "GITHUB_SHA")):
        if value:
            commit, source = str(value), where
            break
    if commit is None:
        m = _NIGHT.search(Path(run.get("dir") or "").name)
        if m:
            commit, source = m.group(1), "the night folder's name"
    digest, digest_source = record.get("config_digest"), "run.json"
    if not digest:
        stage_digests = _stage_digests(run.get("dir"))
        if stage_digests:
            digest = hashlib.sha256(json.dumps(stage_digests, sort_keys=True).encode()).hexdigest()
            digest_source = "the stages' options ({})".format(", ".join(sorted(stage_digests)))
        else:
            digest_source = None
    ci = record.get("ci") if isinstance(record.get("ci"), dict) else {}
    return {"commit": commit, "commit_source": source, "config_digest": digest, "digest_source": digest_source, "ci": ci}


def _stage_digests(run_dir):
    from pipeline.stages import pipeline_order

    out = {}
    if not run_dir:
        return out
    for s in pipeline_order():
        try:
            manifest = json.loads((Path(run_dir) / s / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("config_digest"):
            out[s] = manifest["config_digest"]
    return out


# ---------------------------------------------------------------- noise

def noise_notes(run, gate=None):
    """Sentences for each batch size whose spread is far wider than its median: p99 ≥ 2× p50, mean ≥ 1.5× p50,
    or a p50 whose 95 % interval (from the gate) is wider than 10 % of it."""
    from pipeline.report.collect import results_by_batch

    notes = []
    intervals = {r["batch_size"]: r for r in (gate or {}).get("rows") or [] if r["figure"] == "p50_ms" and r["interval"]}
    for bs, r in sorted(results_by_batch(run).items()):
        p50, p99, mean = r.get("p50_ms"), r.get("p99_ms"), r.get("mean_ms")
        if not p50:
            continue
        said = []
        if p99 is not None and p99 >= NOISY_P99_RATIO * p50:
            said.append("p99 is {:.1f}× the p50 ({:.3g} vs {:.3g} ms)".format(p99 / p50, p99, p50))
        if mean is not None and mean >= NOISY_MEAN_RATIO * p50:
            said.append("the mean is {:.1f}× the p50: a few calls far slower than the rest, or two modes (throughput "
                        "follows the mean)".format(mean / p50))
        row = intervals.get(bs)
        if row and all(v is not None for v in row["interval"]) and row["current"]:
            lo, hi = row["interval"]
            if (hi - lo) / row["current"] > NOISY_INTERVAL:
                said.append("the p50's 95 % interval [{:.3g}, {:.3g}] ms is {:.0%} of it".format(lo, hi, (hi - lo) / row["current"]))
        if said:
            notes.append("batch {}: noisy run: {}".format(bs, "; ".join(said)))
    return notes


def quantile_interval(result, q):
    """(low, high) of the 95 % interval of quantile q, the gate's own (``gate_stats.quantile_interval``),
    with an end the calls cannot bound as None (the page prints it open); None without percentiles."""
    import math

    from pipeline.report.gate_stats import quantile_interval as gate_interval

    interval = gate_interval(result, q)
    return None if interval is None else tuple(None if math.isinf(v) else v for v in interval)
