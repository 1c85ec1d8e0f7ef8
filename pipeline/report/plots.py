"""The report's plots, drawn with matplotlib as inline SVG (text as paths: no fonts, no network).

Each ``*_svg`` function takes plain data and returns an ``<svg>`` element. ``cached_svg`` keeps them
in ``<run dir>/.report/`` by a hash of their data, so an unchanged run's report is assembled
without importing matplotlib at all (``deploy run`` writes the report after every run). The SVG
is deterministic: fixed ids (``svg.hashsalt``) and no date.
"""

import hashlib
import io
import json
import math
import os
import re
from pathlib import Path

from pipeline import files

CACHE = ".report"
PLOT_VERSION = 4  # bump when a plot's look changes: cached SVGs are redrawn
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def cached_svg(cache_dir, kind, data):
    """The SVG of plot ``kind`` for ``data``, from ``cache_dir`` when drawn before (None: no cache)."""
    draw = DRAW[kind]
    digest = hashlib.sha256(json.dumps([kind, PLOT_VERSION, data], sort_keys=True, default=str).encode()).hexdigest()[:24]
    path = Path(cache_dir) / "{}-{}.svg".format(kind, digest) if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            os.utime(path)  # used now: prune() keeps it
        except OSError:
            pass
        return path.read_text(encoding="utf-8")
    svg = draw(data)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            files.write_text(path, svg)
        except OSError:
            pass  # a read-only run folder: the report is still written, the plot drawn again next time
    return svg


def prune(cache_dir, before):
    """Remove the cached plots no report has used since ``before`` (a time.time()): the plots of
    earlier data (and the parameter counts of earlier models). Each plot a report uses is touched when it
    is read or drawn."""
    for path in [*Path(cache_dir).glob("*.svg"), *Path(cache_dir).glob("params-*.json")]:
        try:
            if path.stat().st_mtime < before:
                path.unlink()
        except OSError:
            pass


def _figure(width, height):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96, layout="constrained")
    return fig


def _svg(fig):
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "deploy-report", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE: the SVG is inline in HTML
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)  # matplotlib's RDF block: names, no content
    return re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()


def _style(ax, title, xlabel, ylabel):
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, color="#dddddd", linewidth=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def latency_cdf_svg(series):
    """series: [{"batch_size", "percentiles_ms" (101 values), "p50_ms", "p99_ms"}]: the latency distribution
    per batch size as a CDF, p50 and p99 marked."""
    fig = _figure(6.4, 3.4)
    ax = fig.add_subplot()
    pct = list(range(101))
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        values = s.get("percentiles_ms")
        label = "batch {}: p50 {} ms, p99 {} ms".format(s["batch_size"], _num(s.get("p50_ms")), _num(s.get("p99_ms")))
        if values:
            ax.plot(values, pct, color=color, linewidth=1.6, label=label)
        for q, marker in ((50, "o"), (99, "^")):
            v = s.get("p{}_ms".format(q))
            if v is not None:
                ax.plot([v], [q], marker=marker, color=color, markersize=6, linestyle="none",
                        label=None if values or q == 99 else label)
    ax.set_ylim(0, 101)
    if any(s.get("percentiles_ms") for s in series):
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:g}".format(v)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=8, loc="lower right", frameon=False, title="● p50  ▲ p99", title_fontsize=8)
    _style(ax, "Latency distribution (CDF), per call", "latency per call (ms, log scale)", "percentile")
    return _svg(fig)


def throughput_svg(points):
    """points: [{"batch_size", "throughput_ips", "p50_ms"}]: images per second against batch size."""
    fig = _figure(4.2, 3.4)
    ax = fig.add_subplot()
    xs = [p["batch_size"] for p in points if p.get("throughput_ips") is not None]
    ys = [p["throughput_ips"] for p in points if p.get("throughput_ips") is not None]
    ax.plot(xs, ys, marker="o", color=COLORS[0], linewidth=1.6)
    for x, y in zip(xs, ys):
        ax.annotate("{:.0f}".format(y), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if xs and max(xs) / max(min(xs), 1) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_ylim(bottom=0)
    _style(ax, "Throughput", "batch size", "images / s")
    return _svg(fig)


def training_svg(epochs):
    """epochs: the train stage's history (loss, accuracy, val_loss, val_accuracy per epoch)."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure(7.2, 3.0)
    axes = fig.subplots(1, 2)
    x = list(range(1, len(epochs) + 1))
    for ax, metric, title in ((axes[0], "loss", "Loss"), (axes[1], "accuracy", "Accuracy")):
        for key, color, label in ((metric, COLORS[0], "train"), ("val_" + metric, COLORS[1], "validation")):
            ys = [e.get(key) for e in epochs]
            if any(y is not None for y in ys):
                ax.plot(x, [float("nan") if y is None else y for y in ys], marker="o", markersize=3, color=color,
                        linewidth=1.4, label=label)
        ax.legend(fontsize=8, frameon=False)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _style(ax, title, "epoch", metric)
    return _svg(fig)


def trend_svg(trend):
    """trend: {"title", "unit", "labels": [per night], "failed": [bool per night], "panels": [{"name" (batch 1),
    "values": [value or None per night], "reference", "band": [lo, hi], "status" (tonight's), "reference_label"}]}:
    one figure (p50, p99, throughput, accuracy) over the nights, oldest to newest, as small multiples: each
    batch size on its own axes (a 10 % step at batch 1 is not flattened by batch 8's scale), the gate's
    reference as a dashed line and its band shaded, the right axis in % of the reference, failed nights
    as grey crosses and tonight's point red when the gate called it a regression."""
    panels = [p for p in trend["panels"] if any(v is not None for v in p["values"])] or trend["panels"][:1]
    cols = min(len(panels), 3) or 1
    rows = -(-len(panels) // cols) if panels else 1
    fig = _figure(3.6 * cols if cols > 1 else 5.2, 2.5 * rows)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    n = len(trend["labels"])
    x = list(range(n))
    failed = list(trend.get("failed") or [False] * n)
    step = max(1, -(-n // 8))  # at most ~8 labels per axis
    ticks = sorted(set(list(range(0, n, step)) + ([n - 1] if n else [])))
    for ax, panel in zip(axes, panels):
        ys = [float("nan") if v is None else v for v in panel["values"]]
        ref, band = panel.get("reference"), panel.get("band")
        if band and band[0] is not None and band[1] is not None:
            ax.axhspan(band[0], band[1], color="#2ca02c", alpha=0.14, linewidth=0, label="band")
        if ref is not None:
            ax.axhline(ref, color="#555555", linestyle="--", linewidth=1.0, label=panel.get("reference_label") or "reference")
        ax.plot(x, ys, marker="o", markersize=3, color=COLORS[0], linewidth=1.4, label="nightly")
        bad = [i for i in x if i < len(failed) and failed[i] and panel["values"][i] is not None]
        if bad:
            ax.plot(bad, [ys[i] for i in bad], marker="x", markersize=6, color="#7f7f7f", linestyle="none",
                    label="failed night")
        if n and panel["values"][-1] is not None:
            status = panel.get("status")
            colour = COLORS[1] if status == "regression" else COLORS[2] if status in ("ok", "improved") else COLORS[0]
            ax.plot([n - 1], [ys[-1]], marker="o", markersize=7, color=colour, linestyle="none")
        if _percent_axis(ref, [v for v in ys if v == v] + [b for b in band or () if b is not None]):
            sec = ax.secondary_yaxis("right", functions=(lambda v, r=ref: (v / r - 1) * 100, lambda p, r=ref: r * (1 + p / 100)))
            sec.set_ylabel("% of reference", fontsize=8)
            sec.tick_params(labelsize=7)
        ax.set_xticks(ticks, [_short(trend["labels"][i]) for i in ticks], rotation=30, ha="right")
        if panel is panels[0]:  # one legend per figure: the other panels are drawn the same way
            ax.legend(fontsize=7, loc="best", frameon=True, framealpha=0.85, edgecolor="none")
        title = "{} · {}".format(trend["title"], panel["name"]) if panel.get("name") else trend["title"]
        _style(ax, title, "", trend.get("unit") or "")
        ax.margins(x=0.03)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    return _svg(fig)


def _percent_axis(ref, values):
    """True when the right axis in % of ``ref`` is drawable: every value over ``ref`` finite and within a million
    (a denormal reference, 5e-324, makes the percentages infinite and matplotlib refuses the axis)."""
    if not ref or not math.isfinite(ref):
        return False
    try:
        return all(abs(v / ref) <= CHANGE_SPAN for v in values if math.isfinite(v))
    except (OverflowError, ZeroDivisionError):
        return False


CHANGE_SPAN = 1e6


def power_svg(rails):
    """rails: {rail: mean mW}: mean power per rail during the benchmark."""
    fig = _figure(4.8, 0.5 + 0.35 * len(rails))
    ax = fig.add_subplot()
    names = list(rails)
    ax.barh(names, [rails[n] for n in names], color=COLORS[2])
    ax.invert_yaxis()
    _style(ax, "Mean power per rail", "mW", "")
    return _svg(fig)


def _num(v):
    return "–" if v is None else "{:.3g}".format(v)


def _short(label):
    label = str(label)
    return label if len(label) <= 16 else label[:15] + "…"


DRAW = {"latency_cdf": latency_cdf_svg, "throughput": throughput_svg, "training": training_svg,
        "trend": trend_svg, "power": power_svg}
