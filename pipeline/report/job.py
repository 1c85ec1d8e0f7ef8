"""The CI job's outcome beside the figures' verdict: a night whose steps failed is a red job whatever its
figures say, and its report must say so first.

The workflow hands the report its steps' outcomes (``deploy report RUN --steps FILE``) once they are all
known, that is after the last step that can fail. FILE is JSON, either GitHub Actions' own
``${{ toJSON(steps) }}`` ({step id: {"outcome": ..., "conclusion": ..., "outputs": {...}}}) or a plain
{step: outcome}; an outcome is success, failure, cancelled or skipped. The run folder's ``FAILED``
marker (collect.MARKER: what the workflow writes on a night it keeps) says the same in lines of text.
"""

import json
from pathlib import Path

from pipeline.errors import DeployError

OUTCOMES = ("success", "failure", "cancelled", "skipped")
BAD = ("failure", "cancelled")


def read_steps(path):
    """[(step, outcome)] in the file's order, from a ``--steps`` file (see the module's doc); a file that
    is not one is a one-line DeployError naming the file and the key."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DeployError("--steps {}: cannot read it ({}); give the JSON of the job's step outcomes".format(
            path, e.strerror or e))
    except ValueError as e:
        raise DeployError("--steps {}: not JSON ({}); write it with ${{{{ toJSON(steps) }}}} or as "
                          "{{\"step\": \"success\"}}".format(path, e))
    if not isinstance(data, dict):
        raise DeployError("--steps {}: expected a JSON object of step: outcome, got {}".format(path, type(data).__name__))
    steps = []
    for name, value in data.items():
        outcome = value.get("outcome") if isinstance(value, dict) else value
        if outcome not in OUTCOMES:
            raise DeployError("--steps {}: step {!r} has outcome {!r}; expected one of {}".format(
                path, name, outcome, ", ".join(OUTCOMES)))
        steps.append((str(name), outcome))
    return steps


def job_outcome(run, steps=None):
    """{"failed": bool, "known": bool, "steps": [(step, outcome)], "failures": [sentences]}: whether the
    job that made ``run`` went red, and why. ``known``: the report was given the step outcomes or the
    run carries the workflow's FAILED marker; without either, only the run's own exit code speaks."""
    steps = list(steps or [])
    failures = ["{}: {}".format(name, outcome) for name, outcome in steps if outcome in BAD]
    marker = marker_lines(run)
    for line in marker:
        if line not in failures:
            failures.append(line)
    return {"failed": bool(failures), "known": bool(steps) or bool(marker), "steps": steps, "failures": failures}


def marker_lines(run):
    """The lines of the run folder's FAILED marker (the workflow's reasons), [] without one."""
    from pipeline.report.collect import MARKER

    marker = Path(run.get("dir") or ".") / MARKER
    if not marker.is_file():
        return []
    text = marker.read_text(encoding="utf-8", errors="replace")
    return [line.strip()[:200] for line in text.splitlines() if line.strip()][:20]
