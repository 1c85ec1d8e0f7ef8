"""The one place that turns the agent's benchmark answer into ``benchmark.json`` (host and device alike).

What the numbers mean:

- latency (``p50_ms`` ... ``max_ms``, ``percentiles_ms``): wall time per call (copies, execute, sync), from
  the host's clock (the runner's ``total_ms``). Not trtexec's "Latency", which is an event sum (H2D + GPU
  compute + D2H from CUDA events, no host time): where the two are compared, the wall time is the larger;
- ``gpu_compute_ms`` (TensorRT only): the GPU compute part of each call from CUDA events, p50 and mean
  (trtexec's "GPU Compute Time"); ``phases_mean_ms``: the mean host-to-device copy, compute and
  device-to-host copy;
- ``throughput_ips``: batch x calls / wall seconds of a back-to-back loop run after the per-call timing
  (``loop``: its ``calls`` and ``seconds``, and ``copies_overlap``: whether the loop's copies overlapped
  compute: false on the agent's TensorRT runner (one stream, copies in order), null where there are no copies
  (ONNX Runtime), absent from an agent that did not say. trtexec's "Throughput" overlaps copies by default, so
  it matches this figure only where ``copies_overlap`` is true or the copies are cheap);
- ``power.energy_per_image_mj``: mean board power over that loop x its wall time / the images it ran;
  the window (``window_s``, ``samples``) covers the loop only, after warm-up, and lasts at least
  ``min_samples`` tegrastats samples.
- ``feed_sha256``: the digest of the batch fed (the same seed gives the same pixels on host and board).
"""

from pipeline.bench.latency import summarize


def on_target_device(label, target, board):
    """The one rule: a TensorRT run, for a TensorRT target, on a board that the probe says is the target."""
    return (label.get("runtime") == "tensorrt" and target.runtime == "tensorrt"
            and board is not None and board == target.name)


def result(entry):
    """One batch size's statistics from the agent's answer entry."""
    bs, times, loop = entry["batch_size"], entry["times_ms"], entry["loop"]
    stats = summarize([t / 1000.0 for t in times["total_ms"]], bs, loop_s=loop["seconds"], loop_calls=loop["calls"])
    out = dict(stats, batch_size=bs, feed_sha256=entry["feed_sha256"],
               loop={"calls": loop["calls"], "seconds": loop["seconds"]})
    if "copies_overlap" in loop:  # what the throughput figure is: copies beside compute (true) or in order (false)
        out["loop"]["copies_overlap"] = loop["copies_overlap"]
    compute = times.get("compute_ms")
    if compute:
        gpu = summarize([t / 1000.0 for t in compute], bs)
        out["gpu_compute_ms"] = {"p50": gpu["p50_ms"], "mean": gpu["mean_ms"], "p99": gpu["p99_ms"],
                                 "min": gpu["min_ms"], "max": gpu["max_ms"]}
    phases = {p: sum(times[p]) / len(times[p]) for p in ("h2d_ms", "compute_ms", "d2h_ms") if times.get(p)}
    if phases:
        out["phases_mean_ms"] = phases
    if entry.get("power") is not None:
        out["power"] = power_figures(entry["power"], loop, bs)
    return out


def power_figures(power, loop, batch_size):
    """The window's mean power per rail and board power (mW), its length and sample count, and energy per
    image (mJ) = board power x the loop's wall time / the images it ran (no samples: no energy); the hottest
    reading per sensor (``temps_max_c``), the GPU and EMC clocks' lowest and highest MHz (``clocks_mhz``, as
    root only) and the agent's ``throttled`` reason, where the window has them."""
    from pipeline.device.agent.tegrastats import energy_per_inference_mj

    out = {"samples": power.get("samples", 0), "unparsed": power.get("unparsed", 0), "window_s": power.get("seconds"),
           "interval_ms": power.get("interval_ms"), "min_samples": power.get("min_samples"),
           "rails_mw": power.get("rails_mw", {}), "board_mw": power.get("board_mw"),
           "board_power_source": power.get("board_power_source")}
    for key in ("temps_max_c", "clocks_mhz", "throttled"):  # the gate flags a night whose clocks moved (gate_nights)
        if power.get(key):
            out[key] = power[key]
    images = batch_size * loop["calls"]
    if out["board_mw"] is not None and out["samples"] and images:
        out["energy_per_image_mj"] = energy_per_inference_mj(out["board_mw"], loop["seconds"], images)
    if out["min_samples"] and out["samples"] < out["min_samples"]:
        out["warning"] = "only {} tegrastats samples in the window (wanted {}): the power figures are noisy".format(
            out["samples"], out["min_samples"])
    return out


def build(answer, where, model, settings):
    """benchmark.json's body: ``where`` (the label and where it ran), ``model`` {name, sha256, bytes},
    ``settings`` (the request's), the model's inputs and the per-batch results from ``answer``."""
    results = [result(entry) for entry in answer["results"]]
    used = {entry["inputs"] for entry in answer["results"]}
    settings = dict(settings, inputs="dataset" if used == {"dataset"} else "random")
    if answer.get("power_available") is not None:
        settings["power_available"] = answer["power_available"]
    model = dict(model, inputs=[{"name": i["name"], "shape": None if i["shape"] is None else list(i["shape"]),
                                 "dtype": i["dtype"]} for i in answer["inputs"]])
    return {"where": where, "model": model, "settings": settings, "results": results}


def log_line(r, where_short):
    """One progress line per batch size, the same on host and device."""
    tput = "n/a" if r["throughput_ips"] is None else "{:.1f}".format(r["throughput_ips"])
    line = "benchmark: batch {}: p50 {:.3f} ms, p99 {:.3f} ms, {} img/s ({} it, {})".format(
        r["batch_size"], r["p50_ms"], r["p99_ms"], tput, r["iterations"], where_short)
    energy = (r.get("power") or {}).get("energy_per_image_mj")
    if energy is not None:
        line += ", {:.3g} mJ/image".format(energy)
    return line
