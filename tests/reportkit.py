"""Run folders for the report and compare tests, shaped like deploy's own (the keys a real run
writes; see tests/test_end_to_end.py for a real one), with latency figures summarized by the real
pipeline.bench.latency.summarize from seeded samples."""

import json

import numpy as np

from pipeline.bench.latency import summarize


def latency_samples(median_ms, spread=0.1, n=200, seed=0, slow_calls=0.0):
    """n call times (seconds), log-normal around ``median_ms`` (``spread``: sigma of the log); with
    ``slow_calls`` (a fraction) that share of the calls 20x slower (a stall, a DVFS dip)."""
    rng = np.random.default_rng(seed)
    t = np.exp(rng.normal(np.log(median_ms / 1000.0), spread, size=n))
    if slow_calls:
        t[: int(round(slow_calls * n))] *= 20.0
    return list(t)


def bench_rows(medians, spread=0.1, n=200, seed=0, power=False, phases=False, slow_calls=0.0):
    rows = []
    for i, (bs, median) in enumerate(sorted(medians.items())):
        row = dict(summarize(latency_samples(median, spread, n, seed + i, slow_calls), bs), batch_size=bs)
        if phases:
            row["phases_mean_ms"] = {"h2d_ms": 0.1 * median, "compute_ms": 0.8 * median, "d2h_ms": 0.05 * median}
        if power:
            row["power"] = {"samples": 12, "rails_mw": {"VDD_IN": 5200.0, "VDD_CPU_GPU_CV": 2100.0, "VDD_SOC": 1400.0},
                            "board_mw": 5200.0, "board_power_source": "VDD_IN",
                            "energy_per_image_mj": 5200.0 * median / 1000.0 / bs}
        rows.append(row)
    return rows


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def make_run(folder, medians=None, spread=0.1, n=200, seed=0, device=True, top1=0.99, val_accuracy=0.8,
             consistency=True, deployable=True, finished="2026-11-24T02:00:00+0000", board="jetson_tx2",
             message=None, power_mode="MAXN", clocks_locked=True, tensorrt="8.2.1", accuracy_images=16, exit_code=0,
             failed=None, slow_calls=0.0):
    """A complete run folder: run.json, manifests, history, check, rewrite, comparison, benchmark."""
    medians = medians or {1: 4.0, 8: 20.0}
    stages = [("train", "cached", "acc 0.9, val_acc 0.8"), ("export", "cached", "input [?,96,96,3] -> probabilities [?,4]"),
              ("freeze", "cached", "794 nodes, 321 weights"), ("check", "ran", "recommended onnx at opset 13: 0 blockers"),
              ("rewrite", "ran", "fold_constants"), ("convert", "ran", "opset 13, 105 nodes, max diff 1.1e-06"),
              ("engine", "ran", "fp16 engine, 3.1 MB"), ("benchmark", "ran", "jetson_tx2/tensorrt: p50 4 ms @b1")]
    _write(folder / "run.json", {
        "schema": "deploy.run/1", "run": folder.name, "config": "configs/jetson_tx2.yaml", "target": "jetson_tx2", "started": finished,
        "finished": finished, "exit_code": exit_code,
        "stages": [{"name": s, "status": st, "seconds": 1.0, "message": message if message and s == "engine" else "",
                    "results": {"summary": summ}} for s, st, summ in stages]})
    for s, _, summ in stages:
        _write(folder / s / "manifest.json", {"schema": "deploy.manifest/1", "stage": s, "status": "ok", "duration_s": 2.5, "started": finished,
                                              "results": {"summary": summ}, "outputs": {}})
    _write(folder / "train" / "history.json", {"schema": "deploy.history/1", "classes": ["circle", "cross", "square", "triangle"], "restore": None,
                                               "epochs": [{"loss": 1.2 - 0.1 * e, "accuracy": 0.5 + 0.04 * e,
                                                           "val_loss": 1.3 - 0.08 * e, "val_accuracy": val_accuracy - 0.03 * (9 - e)}
                                                          for e in range(10)]})
    finding = {"kind": "unsupported_op", "cause": "AddV2 has no UFF converter", "fix": "rewrite uff_compat",
               "nodes": ["model/add", "model/add_1"], "batch_dependent": False}
    _write(folder / "check" / "check.json", {
        "schema": "deploy.check/2", "deployable": deployable, "verdict": "YES" if deployable else "NO",
        "target": {"name": "jetson_tx2", "tensorrt": "8.2.1", "jetpack": "4.6.6"},
        "recommended": {"route": "onnx", "detail": "opset 13, TensorRT 8.2.1 ONNX parser", "blockers": 0},
        "routes": [{"route": "uff", "detail": "UFF parser, TensorRT 8.2.1", "blockers": 1, "accepted_but_wrong": [],
                    "findings": [finding]},
                   {"route": "onnx", "detail": "opset 13", "blockers": 0, "accepted_but_wrong": [], "findings": []}],
        "findings": []})
    _write(folder / "rewrite" / "rewrite.json", {
        "schema": "deploy.rewrite/1", "nodes": {"before": 794, "after": 282}, "check_before": {"recommended": "onnx"}, "check_after": {"recommended": "onnx"},
        "passes": [{"pass": "fold_constants", "ops": {"Const": -156, "Mul": -104}, "sites": ["a", "b"],
                    "comparison": {"max_abs_diff": 0.0, "passed": True}, "changes_behaviour": False}]})
    _write(folder / "convert" / "comparison.json", {"schema": "deploy.conversion/1", "max_abs_diff": 1.1e-6, "tolerance": 1e-4, "samples": 8,
                                                    "inputs": "dataset data (8 images)",
                                                    "runtimes": {"candidate": {"runtime": "onnxruntime"}, "reference": "tensorflow"}})
    where = {"runtime": "tensorrt" if device else "onnxruntime", "version": "8.2.1" if device else "1.32.0",
             "target": "jetson_tx2", "on_target_device": device, "device": "tx2.lab (ssh)" if device else None,
             "fingerprint": {"board": board, "l4t": "32.7.6", "jetpack": "4.6.6", "tensorrt": tensorrt, "cuda": "10.2",
                             "power_mode": {"mode_name": power_mode, "mode_id": 0, "is_max": power_mode == "MAXN"},
                             "clocks_locked": clocks_locked,
                             "python": "3.6.9", "hostname": "tx2"} if device else {},
             "host": None if device else {"machine": "x86_64", "node": "vm"}}
    if not device:
        where["note"] = "host CPU numbers via ONNX Runtime; not Jetson numbers"
    bench = {"schema": "deploy.benchmark/1", "where": where, "results": bench_rows(medians, spread, n, seed, power=device, phases=device,
                                                  slow_calls=slow_calls),
             "consistency": {"passed": consistency, "batch_sizes": [8], "images": {"count": 4, "source": "dataset"},
                             "outputs": [{"name": "probabilities:0", "max_abs_diff": 0.0 if consistency else 0.2,
                                          "passed": consistency}],
                             "first_divergence": None if consistency else "model/bn/FusedBatchNormV3"}}
    if device:
        bench["accuracy"] = {"max_abs_diff": 0.004, "top1_agreement": top1, "images": accuracy_images, "source": "dataset",
                             "tolerance": {"atol": 0.01, "rtol": 0.01, "precision": "fp16"}}
    _write(folder / "benchmark" / "benchmark.json", bench)
    if failed is not None:  # the nightly workflow's marker on a night whose steps did not all succeed
        (folder / "FAILED").write_text(failed + "\n")
    return folder


def edit_json(path, change):
    """Rewrite the JSON file at ``path`` with ``change(data)`` (which edits in place or returns the new data);
    NaN and infinities are written as JSON's NaN/Infinity tokens, as Python's json does by default."""
    data = json.loads(path.read_text())
    out = change(data)
    path.write_text(json.dumps(data if out is None else out))
    return path


def gate_row(figure, batch_size, reference, current, status, band=0.04, note="", interval=0.01):
    """One row of a contract-A comparison.json (``deploy.comparison/2``): ``band`` and ``interval`` are
    relative half widths around the reference and the current figure."""
    return {"figure": figure, "batch_size": batch_size, "baseline": reference, "current": current, "reference": reference,
            "band": None if reference is None else [reference * (1 - band), reference * (1 + band)],
            "interval": None if current is None else [current * (1 - interval), current * (1 + interval)],
            "change": None if reference in (None, 0) or current is None else (current - reference) / reference,
            "status": status, "note": note}


def write_comparison(folder, verdict, rows=(), reasons=(), nights=12, failed_nights=0, kind="jetson",
                     label="jetson_tx2 (JetPack 4.6.6, TensorRT 8.2.1, MAXN)", baseline="2026-11-01"):
    """``<folder>/comparison.json`` as ``deploy compare -o`` writes it (contract A); returns its path."""
    data = {"schema": "deploy.comparison/2", "verdict": verdict, "reasons": list(reasons),
            "baseline": {"dir": "nightly/baseline", "name": "baseline", "when": baseline + "T02:00:00+0000"},
            "current": {"dir": str(folder), "name": folder.name},
            "reference": {"nights": nights, "failed_nights": failed_nights,
                          "fingerprint": {"board": "jetson_tx2", "jetpack": "4.6.6", "tensorrt": "8.2.1", "power_mode": "MAXN"}},
            "hardware": {"kind": kind, "label": label}, "rows": list(rows)}
    _write(folder / "comparison.json", data)
    return folder / "comparison.json"
