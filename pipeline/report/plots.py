"""The report's plots, drawn with matplotlib as inline SVG (text as paths: no fonts, no network).

Each ``*_svg`` function takes plain data and returns an ``<svg>`` element. ``cached_svg`` keeps them
in ``<run dir>/.report/`` by a hash of their data, so an unchanged run's report is assembled
without importing matplotlib at all (``deploy run`` writes the report after every run). The SVG
is deterministic: fixed ids (``svg.hashsalt``) and no date.
"""

import hashlib
import io
import json
import os
import re
from pathlib import Path

from pipeline import files

CACHE = ".report"
PLOT_VERSION = 3  # bump when a plot's look changes: cached SVGs are redrawn
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
    earlier data. Each plot a report uses is touched when it is read or drawn."""
    for path in Path(cache_dir).glob("*.svg"):
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
    """trend: {"labels": [run names], "series": {title: {line label: [value or None per run]}}}: one
    panel per title (p50, p99, throughput, accuracy), runs oldest to newest."""
    panels = [(t, lines) for t, lines in trend["series"].items() if any(v is not None for vs in lines.values() for v in vs)]
    fig = _figure(7.2, 2.4 * max(1, (len(panels) + 1) // 2))
    axes = fig.subplots(max(1, (len(panels) + 1) // 2), 2, squeeze=False).ravel()
    x = list(range(len(trend["labels"])))
    for ax, (title, lines) in zip(axes, panels):
        for i, (label, ys) in enumerate(lines.items()):
            if all(y is None for y in ys):
                continue
            ax.plot(x, [float("nan") if y is None else y for y in ys], marker="o", markersize=3,
                    color=COLORS[i % len(COLORS)], linewidth=1.4, label=label)
        ax.set_xticks(x, [_short(lab) for lab in trend["labels"]], rotation=30, ha="right")
        ax.legend(fontsize=7, frameon=False)
        _style(ax, title, "", "")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    return _svg(fig)


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
    return label if len(label) <= 16 else label[:15] + "…"


DRAW = {"latency_cdf": latency_cdf_svg, "throughput": throughput_svg, "training": training_svg,
        "trend": trend_svg, "power": power_svg}
