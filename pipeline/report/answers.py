"""What an engineer opens the report for, as plain data, before any gate: will the model run on the target
(the verdict, the route and what the verdict rests on), what failed or is pending and the next command,
accuracy against TensorFlow, and latency where it was measured (and where that was: ONNX Runtime on the
host is never a Jetson's figure). pipeline.report.first_screen puts it into words on the page.

Reads defensively like the rest of the report: what the run folder does not say is unknown, never guessed.
"""

from pipeline.report import machine
from pipeline.report.collect import results_by_batch

RUNTIME_WORDS = {"onnxruntime": "ONNX Runtime", "tensorrt": "TensorRT"}
BASIS_WORDS = {
    "built": "a TensorRT engine was built from it",
    "engine failed": "the engine build failed",
    "conversion failed": "the conversion failed",
    "converted": "converted: tf2onnx made the ONNX model (TensorRT's parser: from its op table until an engine is built)",
    "converted in check": "converted: deploy check ran tf2onnx on the graph (TensorRT's parser: from its op table)",
    "predicted": "predicted from tf2onnx's op table (tf2onnx not run)",
    "op tables": "from the converters' op tables",
}


def _stages(run):
    return {s.get("name"): s for s in run.get("stages") or []}


def _target(run):
    record = run.get("record") or {}
    return record.get("target") or ((run.get("check") or {}).get("target") or {}).get("name")


def target_answer(run):
    """{"answer": "YES" | "NO" | "unknown", "target", "route", "detail", "basis", "why"}: will the model run
    on the run's target. The strongest evidence the run has decides: a built engine, a failed engine
    build or conversion, then deploy check's verdict, whose onnx route is "converted" when tf2onnx made the
    model (in this run's convert stage or in the check) and "predicted" when it did not run."""
    stages, check = _stages(run), run.get("check") or {}
    rec = check.get("recommended") or {}
    route, detail = rec.get("route"), rec.get("detail")
    out = {"answer": "unknown", "target": _target(run), "route": route, "detail": detail, "basis": None, "why": ""}
    engine, convert = stages.get("engine") or {}, stages.get("convert") or {}
    if engine.get("status") in ("ran", "cached"):
        return dict(out, answer="YES", basis="built", why=engine.get("summary") or engine.get("message") or "")
    if engine.get("status") == "failed":  # what failed is open_items' (the failed row, with the next command)
        return dict(out, answer="NO", basis="engine failed")
    if convert.get("status") == "failed":
        said = "deploy check said YES ({}): the conversion is what counts".format(
            ans_basis(check, route)) if check.get("verdict") == "YES" else ""
        return dict(out, answer="NO", basis="conversion failed", why=said)
    if not check:
        why = "no deploy check in this run"
        if stages.get("check", {}).get("status") == "failed":
            why = "the check stage failed: " + (stages["check"].get("message") or "")
        return dict(out, why=why)
    answer = "YES" if check.get("deployable") else "NO"
    if convert.get("status") in ("ran", "cached") and route == "onnx":
        basis = "converted"  # the check's "(tf2onnx prediction)" was before the convert stage converted it
        out["detail"] = (detail or "").replace(" (tf2onnx prediction)", "") or None
    else:
        basis = ans_basis(check, route)
    why = ""
    if answer == "NO":
        blockers = rec.get("blockers")
        why = "{} blocker{} on the {} route (the Check section lists them with their fixes)".format(
            blockers, "" if blockers == 1 else "s", route) if blockers else "see the Check section"
    return dict(out, answer=answer, basis=basis, why=why)


def ans_basis(check, route):
    """What deploy check's verdict on ``route`` rests on: "converted", "predicted" or "op tables"."""
    row = next((r for r in check.get("routes") or [] if isinstance(r, dict) and r.get("route") == route), {})
    basis = row.get("basis") or "op tables"
    return "converted in check" if basis == "converted" else basis


def open_items(run):
    """[{"stage", "status", "why", "next"}]: the stages that failed, then those pending, each with the
    command to run next; one row for the stages not run because an earlier one failed."""
    failed, pending, skipped = [], [], []
    for s in run.get("stages") or []:
        status = s.get("status")
        if status == "failed":
            failed.append({"stage": s.get("name"), "status": "failed", "why": s.get("message") or "",
                           "next": next_command(run, s)})
        elif status == "pending":
            pending.append({"stage": s.get("name"), "status": "pending", "why": s.get("message") or "",
                            "next": next_command(run, s)})
        elif status == "not run":
            skipped.append(s.get("name"))
    rows = failed + pending
    if skipped:
        rows.append({"stage": ", ".join(skipped), "status": "not run", "why": "an earlier stage failed", "next": None})
    return rows


def next_command(run, stage):
    """The command that moves ``stage`` (a stage table row, failed or pending) on, in words a user can
    paste; None when the run folder does not say enough."""
    import shlex

    record = run.get("record") or {}
    config = record.get("config") or "CONFIG"
    sets = [s for s in record.get("overrides") or () if isinstance(s, str)]
    config += "".join(" --set " + shlex.quote(s) for s in sets)  # the run's own overrides (its model.source, ...)
    name, why = stage.get("name"), stage.get("message") or ""
    target = _target(run) or "TARGET"
    if stage.get("status") == "failed" and name in ("convert", "check"):  # check names each cause and its fix
        return "deploy check {} --target {}".format(_checked_graph(run, name), target)
    if stage.get("status") == "pending" and name == "engine":
        if "add a device:" in why:
            return "deploy run {} --set device.transport=ssh --set device.host=BOARD".format(config)
        return "deploy device probe {} (then deploy run {})".format(config, config)
    return "deploy run {}".format(config)


def _checked_graph(run, failed):
    """The frozen graph the failed stage read: the rewrite stage's output before convert when it ran, else the
    freeze stage's; a run whose model.source was a frozen graph has neither (that stage was skipped): MODEL."""
    from pathlib import Path

    stages = ("rewrite", "freeze") if failed == "convert" else ("freeze",)
    for stage in stages:
        path = Path(run["dir"]) / stage / "frozen.pb"
        if path.is_file():
            return str(path)
    return "MODEL"


def accuracy_answer(run):
    """{"tensorflow": {...} or None, "engine": {...} or None}: the converted model against TensorFlow
    (the convert stage's comparison) and the engine against ONNX Runtime (the benchmark's)."""
    comparison = run.get("comparison") or {}
    tf = None
    if comparison.get("max_abs_diff") is not None:
        tol = comparison.get("tolerance")
        within = comparison.get("within_tolerance")
        if within is None and tol is not None:
            within = comparison["max_abs_diff"] <= tol
        tf = {"max_abs_diff": comparison["max_abs_diff"], "tolerance": tol, "within": within,
              "samples": comparison.get("samples"), "inputs": comparison.get("inputs"),
              "runtime": RUNTIME_WORDS.get(((comparison.get("runtimes") or {}).get("candidate") or {}).get("runtime"),
                                           "ONNX Runtime")}
    acc = (run.get("benchmark") or {}).get("accuracy") or {}
    engine = None
    if acc:
        engine = {"top1": acc.get("top1_agreement"), "max_abs_diff": acc.get("max_abs_diff"),
                  "precision": (acc.get("tolerance") or {}).get("precision"), "images": acc.get("images")}
    return {"tensorflow": tf, "engine": engine}


def latency_answer(run):
    """{"where", "host_only", "rows": [(batch, p50 ms, img/s)]} of the benchmark, or None without one.
    img/s is the benchmark's own throughput (a back-to-back loop's images over its wall clock), the one
    the report shows everywhere. ``where`` says what ran it and on what."""
    results = sorted(results_by_batch(run).items())
    if not results:
        return None
    where = (run.get("benchmark") or {}).get("where") or {}
    runtime = RUNTIME_WORDS.get(where.get("runtime"), where.get("runtime") or "an unnamed runtime")
    version = " " + str(where["version"]) if where.get("version") else ""
    host_only = machine.is_host_only(run)
    if host_only:
        cpu = machine.host_cpu(where)
        place = "this host's CPU{}: not Jetson figures".format(" ({})".format(cpu) if cpu else "")
    else:
        label = machine.hardware(run)["label"]
        place = "{}{}".format(where.get("device") or "the device", " — " + label if label != "no device figures" else "")
    return {"where": "{}{} on {}".format(runtime, version, place), "host_only": host_only,
            "rows": [(bs, r.get("p50_ms"), r.get("throughput_ips")) for bs, r in results]}
