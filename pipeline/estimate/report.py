"""The estimate report as text and markdown (JSON is the dict itself, checked by pipeline.records.estimate)."""


def format_text(report):
    lines = ["{}: {} engine layers, {:.3g} GFLOPs per image, {:.3g} MB of weights".format(
        report["model"], report["layers"], report["gflops"], report["weights_mb"])]
    for e in report["estimates"]:
        lines.append("")
        lines.append("{} {} batch {}: {:.3g} ms (range {:.3g} to {:.3g} ms), {:.4g} images/s, bound by {}".format(
            e["target"], e["precision"], e["batch"], e["latency_ms"], e["low_ms"], e["high_ms"],
            e["throughput"] or 0, e["bound"]))
        if e.get("measured_ms"):
            lines.append("  measured on the board: {:.3g} ms ({:+.0%} against the estimate)".format(
                e["measured_ms"], e["measured_ms"] / e["latency_ms"] - 1))
        lines.append("  assumes {} ({}); calibration: {}".format(e["power_mode"], e["gpu"], e["calibration"]))
        if e["unknown_count"]:
            lines.append("  {} layer(s) whose shape could not be followed count nothing, e.g. {}".format(
                e["unknown_count"], ", ".join(e["unknown_layers"][:3])))
        lines.append("  most costly layers:")
        for layer in e["top_layers"]:
            lines.append("    {:>8.3f} ms  {:<8} {:<9} {}".format(layer["ms"], layer["bound"], layer["kind"],
                                                                 layer["name"]))
    lines.append("")
    lines.append("DLA: {}. Weak where: {}.".format(report["dla"], report["weak_where"]))
    return "\n".join(lines)


def format_markdown(report):
    lines = ["## Latency estimate: `{}`".format(report["model"]), "",
             "{} engine layers, {:.3g} GFLOPs per image.".format(report["layers"], report["gflops"]), "",
             "| target | precision | batch | estimate ms | range ms | images/s | bound | power mode |",
             "|---|---|---|---|---|---|---|---|"]
    for e in report["estimates"]:
        lines.append("| {} | {} | {} | {:.3g} | {:.3g} to {:.3g} | {:.4g} | {} | {} |".format(
            e["target"], e["precision"], e["batch"], e["latency_ms"], e["low_ms"], e["high_ms"], e["throughput"] or 0,
            e["bound"], e["power_mode"]))
    for e in report["estimates"][:1]:
        lines += ["", "Most costly layers ({} {} batch {}):".format(e["target"], e["precision"], e["batch"]), "",
                  "| layer | kind | ms | bound |", "|---|---|---|---|"]
        lines += ["| `{}` | {} | {:.3f} | {} |".format(x["name"], x["kind"], x["ms"], x["bound"]) for x in e["top_layers"]]
    lines += ["", "Calibration: {}. DLA: {}. Weak where: {}.".format(
        report["estimates"][0]["calibration"] if report["estimates"] else "-", report["dla"], report["weak_where"])]
    return "\n".join(lines)
