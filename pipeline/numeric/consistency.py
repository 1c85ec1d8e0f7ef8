"""Batch consistency: does an image give the same output alone as inside a batch, beside any neighbours?

A model that still runs batch norm (or dropout) in training mode gives an image a different output
alone, beside other images, or twice in a row. ``batch_consistency`` runs each sample image alone
(twice: stochastic outputs show up there) and at every position of batches of other images and of
copies of itself, and compares its output row with the alone output. For a frozen TensorFlow graph,
``diagnose`` names the first node (topological order) whose output departs.

Large batches are checked at a sample of positions (``positions``): the ends, the middle and a few
seeded others, never fewer than every position of a batch of 16; the batch of copies of itself is
compared at every position in one run. The work is bounded before it starts: a batch whose inputs
alone would not fit in half the memory available is refused, and so is a check whose time,
estimated from a timed run of the smallest batch, is over ``time_limit_s`` (docs/reliability.md).

It runs any session of ``pipeline.backends`` with one image input (TensorFlow, ONNX Runtime; on a
Jetson a TensorRT engine whose optimisation profile covers batch 1 up to the largest batch size
checked: a fixed-batch engine cannot be checked). ``check_model(path, ...)`` is ``deploy
consistency`` without its flags (the CLI parses them).
"""

from dataclasses import dataclass, field
from typing import List, Optional

from pipeline.errors import DeployError, StageFailed
from pipeline.graph.io import channels_first, image_input
from pipeline.numeric import ATOL, RTOL, batched, diff, finite
from pipeline.numeric.divergence import Divergence, divergences


class _ImageInput:
    """A session seen through its one image input: ``run(batch)`` -> outputs, runtime errors as one line."""

    def __init__(self, session, model=None):
        if len(session.inputs) != 1:
            raise DeployError("consistency checks models with one image input; {} has {} ({})".format(
                model or session.name, len(session.inputs), ", ".join(i[0] for i in session.inputs)))
        self.session, self.name = session, session.name
        self.input_name, shape, self.dtype = session.inputs[0]
        self.input_shape = None if shape is None else tuple(shape)
        self.output_names, self.label = list(session.output_names), session.label

    def run(self, batch):
        import numpy as np

        batch = np.ascontiguousarray(batch, dtype=self.dtype)
        try:
            return [np.asarray(out) for out in self.session.run({self.input_name: batch})]
        except DeployError:
            raise
        except Exception as e:  # the runtime's own error types
            msg = "{} cannot run {} on a batch of shape {}: {}".format(
                self.name, self.input_name, list(batch.shape), " ".join(str(e).split())[:300] or type(e).__name__)
            raise (StageFailed(msg) if len(batch) > 1 else DeployError(msg)) from None


# ------------------------------------------------------------------------------ the check


@dataclass
class OutputResult:
    name: str
    compared: bool = True  # False: the output's first dimension is not the batch (see note)
    note: Optional[str] = None
    cases: int = 0  # (image, batch size, position, neighbours) comparisons
    failed_cases: int = 0
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0  # |diff| / max(|alone|, tolerance)
    worst: Optional[dict] = None  # image, batch_size, position, neighbours ("other images" | "copies of itself")
    stochastic: bool = False  # two alone runs of the same image differ
    stochastic_diff: float = 0.0

    @property
    def passed(self):
        return not self.stochastic and (not self.compared or self.failed_cases == 0)


@dataclass
class ConsistencyReport:
    backend: str
    input_name: str
    input_shape: Optional[tuple]
    samples: int
    source: str
    batch_sizes: tuple
    tolerance: float
    rtol: float
    outputs: List[OutputResult] = field(default_factory=list)
    runs: int = 0
    model: Optional[str] = None
    label: dict = field(default_factory=dict)
    divergences: List["Divergence"] = field(default_factory=list)  # in graph order: stochastic and/or batch-dependent
    divergence_note: Optional[str] = None

    @property
    def passed(self):
        return all(o.passed for o in self.outputs)

    @property
    def divergence(self):
        """The first divergence in graph order, or None."""
        return self.divergences[0] if self.divergences else None

    @property
    def status(self):
        return "stochastic" if any(o.stochastic for o in self.outputs) else "pass" if self.passed else "inconsistent"

    def to_dict(self):
        return finite({
            "status": self.status, "passed": self.passed, "model": self.model, "backend": self.backend,
            "runtime": self.label, "input": {"name": self.input_name, "shape": _shape(self.input_shape)},
            "images": {"count": self.samples, "source": self.source}, "batch_sizes": list(self.batch_sizes),
            "tolerance": {"abs": self.tolerance, "rel": self.rtol}, "runs": self.runs,
            "outputs": [dict(vars(o), passed=o.passed) for o in self.outputs],
            "first_divergence": dict(vars(self.divergence)) if self.divergence else None,
            "divergences": [dict(vars(d)) for d in self.divergences],
            "first_divergence_note": self.divergence_note,
        })


def _shape(shape):
    return None if shape is None else [d if d is None else int(d) for d in shape]


ALL_POSITIONS_UP_TO = 16  # batches up to this size are checked at every position
SAMPLED_POSITIONS = 8  # larger ones at this many: both ends, the middle, and seeded others
TIME_LIMIT_S = 600.0


def positions(size, rng):
    """The positions of a batch of ``size`` an image is placed at beside other images: all of them up
    to ALL_POSITIONS_UP_TO, else the first two, the middle, the last two and seeded others."""
    if size <= ALL_POSITIONS_UP_TO:
        return list(range(size))
    chosen = {0, 1, size // 2, size - 2, size - 1}
    rest = [p for p in range(size) if p not in chosen]
    chosen.update(int(p) for p in rng.choice(rest, SAMPLED_POSITIONS - len(chosen), replace=False))
    return sorted(chosen)


def _available_bytes():
    """MemAvailable from /proc/meminfo, or None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gib(n):
    return "{:.1f} GiB".format(n / float(1 << 30))


def _check_memory(images, sizes, dtype, available=None):
    """Refuse before any run when the largest batch's input alone would take over half the memory available."""
    import numpy as np

    per_image = int(np.prod(images.shape[1:])) * np.dtype(dtype).itemsize
    need = per_image * max(sizes) * 2  # the batch and its cast copy
    available = _available_bytes() if available is None else available
    if available is not None and need > available // 2:
        fits = max(1, (available // 2) // (per_image * 2))
        raise DeployError("batch size {} needs about {} for its input alone and this machine has {} available (the "
                          "limit is half of it): use batch sizes up to {}".format(max(sizes), _gib(need), _gib(available),
                                                                                   fits))


def _check_time(seconds_per_image, plan, limit):
    """Refuse when the planned runs (batch size per run), at the measured time per image, would take over ``limit``."""
    estimate = seconds_per_image * sum(plan)
    if limit is not None and estimate > limit:
        raise DeployError("the consistency check would take about {:.0f} s ({} runs, {} images run; measured {:.2g} ms "
                          "per image) and the limit is {:.0f} s: use fewer or smaller batch sizes or fewer images".format(
                              estimate, len(plan), sum(plan), seconds_per_image * 1000, limit))
    return estimate


def batch_consistency(session, images, batch_sizes=(2, 8), tolerance=ATOL, rtol=RTOL, seed=0, source=None, model=None,
                      time_limit_s=TIME_LIMIT_S, progress=None):
    """Each image alone (twice) vs. inside each batch size (at ``positions``), beside other images and
    copies of itself. ``progress(line)``, if given, hears what is running; DeployError when the work is
    over the memory or time bound (refused before the long runs start)."""
    import time

    import numpy as np

    backend = _ImageInput(session, model)
    shape = backend.input_shape
    if shape and shape[0] is not None:
        raise DeployError("input {} has a fixed batch dimension of {} (shape {}); batch consistency needs a dynamic "
                          "batch: export/convert with batch None".format(backend.input_name, shape[0], _shape(shape)))
    sizes = tuple(sorted({int(b) for b in batch_sizes}))
    if not sizes or sizes[0] < 2:
        raise DeployError("batch sizes must be 2 or more (got {})".format(", ".join(map(str, batch_sizes)) or "none"))
    images = np.asarray(images)
    images = images[None] if shape is not None and images.ndim == len(shape) - 1 else images
    if len(images) == 0:
        raise DeployError("batch consistency needs at least one image")
    pool, rng = images, np.random.RandomState(seed)
    if len(images) == 1:  # one seeded stranger in the image's value range, so there is a neighbour
        lo, hi = float(images.min()), float(images.max())
        pool = np.concatenate([images, rng.uniform(lo, max(hi, lo + 1), images.shape).astype(images.dtype)])
    _check_memory(images, sizes, backend.dtype)
    plan = {size: positions(size, rng) for size in sizes}
    report = ConsistencyReport(backend.name, backend.input_name, shape, len(images), source or "given", sizes, tolerance,
                               rtol, [OutputResult(n) for n in backend.output_names], model=model, label=backend.label)

    def compare(i, alone, batch, positions, kind):
        report.runs += 1
        for res, ref, got in zip(report.outputs, alone, backend.run(batch)):
            if res.compared and not batched(ref, got, len(batch)):
                res.compared = False
                res.note = "not compared: its first dimension is not the batch (alone {}, batch of {}: {})".format(
                    list(ref.shape), len(batch), list(got.shape))
            for p in positions if res.compared else ():
                abs_d, rel_d, over = diff(ref[0], got[p], tolerance, rtol)
                res.cases, res.failed_cases = res.cases + 1, res.failed_cases + over
                res.max_rel_diff = max(res.max_rel_diff, rel_d)
                if abs_d > res.max_abs_diff or res.worst is None:
                    res.max_abs_diff = abs_d
                    res.worst = {"image": i, "batch_size": len(batch), "position": p, "neighbours": kind}

    # per image: two alone runs, then per size one batch of copies and one batch per sampled position
    runs_per_image = [1, 1] + [size for size in sizes for _ in range(1 + len(plan[size]))]
    done = 0
    for i in range(len(images)):
        image = images[i:i + 1]
        alone, again = backend.run(image), backend.run(image)
        report.runs += 2
        for res, a, b in zip(report.outputs, alone, again):
            abs_d, _, over = diff(a, b, tolerance, rtol) if a.shape == b.shape else (float("inf"), 0.0, True)
            if over:
                res.stochastic, res.stochastic_diff = True, max(res.stochastic_diff, abs_d)
        others = [j for j in range(len(pool)) if j != i]
        for size in sizes:
            started = time.perf_counter()
            compare(i, alone, np.repeat(image, size, axis=0), range(size), "copies of itself")  # every position at once
            if i == 0 and size == sizes[0]:  # the smallest batch, timed: the estimate for all the rest
                estimate = _check_time((time.perf_counter() - started) / size, runs_per_image * len(images), time_limit_s)
                if progress is not None:
                    progress("consistency: {} images x batch {} ({} runs, about {:.0f} s)".format(
                        len(images), ", ".join(map(str, sizes)), len(runs_per_image) * len(images), estimate))
            for p in plan[size]:
                idx = list(rng.choice(others, size - 1, replace=len(others) < size - 1))
                compare(i, alone, pool[idx[:p] + [i] + idx[p:]], [p], "other images")
        done += 1
        if progress is not None and len(images) > 1:
            progress("consistency: image {}/{} done".format(done, len(images)))
    if not any(o.compared for o in report.outputs):
        raise DeployError("no output of {} has the batch as its first dimension; nothing to compare ({})".format(
            model or backend.name, "; ".join(o.name + ": " + o.note for o in report.outputs)))
    return report


def diagnose(report, path, images, tolerance=ATOL, rtol=RTOL):
    """Fill ``report.divergences``: the search runs on the first image at position 0 beside the
    other images (a mirrored copy of it when it is the only one), whatever case failed worst, so
    the answer depends on the graph and the images only."""
    neighbours = images[1:] if len(images) > 1 else images[:1, ::-1]
    try:
        report.divergences = divergences(path, images[:1], neighbours, tolerance=tolerance, rtol=rtol, position=0)
        if not report.divergences:
            report.divergence_note = "first divergence: no float tensor departs beyond tolerance (non-float outputs differ)"
    except DeployError as e:
        report.divergence_note = "first divergence: not found ({})".format(e)
    return report


def format_report(report):
    """The report for a human: verdict, what ran, one line per output, the first divergence."""
    verdict = {"pass": "PASS: each image's output is the same alone and inside any batch",
               "inconsistent": "FAIL: an image's output changes with the batch it is in",
               "stochastic": "FAIL: the output is random (two runs of the same image differ)"}[report.status]
    shape = "[{}]".format(", ".join("?" if d is None else str(d) for d in report.input_shape or ()))
    lines = ["batch consistency: " + verdict,
             "  model      {} ({}), input {} {}".format(report.model or "-", report.backend, report.input_name, shape),
             "  images     {} ({})".format(report.samples, report.source),
             "  batches    alone (twice) vs. batch {} (every position up to 16, else 8 of them), beside other images and "
             "copies of itself"
             " ({} runs)".format(", ".join(map(str, report.batch_sizes)), report.runs),
             "  tolerance  |diff| <= {:g} + {:g} * |alone|".format(report.tolerance, report.rtol), ""]
    for o in report.outputs:
        w = o.worst or {}
        lines.append("  {}: {}".format(o.name, o.note) if not o.compared else
                     "  {}: {}  max abs diff {:.3g}, max rel diff {:.3g}; {}/{} cases over; worst: image {}, batch {}, "
                     "position {}, beside {}".format(o.name, "PASS" if o.passed else "FAIL", o.max_abs_diff, o.max_rel_diff,
                                                     o.failed_cases, o.cases, w.get("image"), w.get("batch_size"),
                                                     w.get("position"), w.get("neighbours")))
        if o.stochastic:
            lines.append("    stochastic: two alone runs of the same image differ by {:.3g}".format(o.stochastic_diff))
    for k, div in enumerate(report.divergences):
        lines += ["", str(div) if k == 0 else "also " + str(div)[len("first "):]] + (["  " + div.hint] if div.hint else [])
    if not report.divergences and report.divergence_note:
        lines += ["", report.divergence_note]
    return "\n".join(lines)


def _images(shape, samples, dataset, seed):
    """``samples`` images for an [N, H, W, C] (or [N, C, H, W]) input, from ``dataset`` or seeded random pixels.
    ``pipeline.graph.io``'s rules: ``channels_first`` tells the layout, ``image_input`` the fixed image
    size; a dynamic channel count is fed 3 (RGB)."""
    if shape is None or len(shape) != 4:
        raise DeployError("input has shape {}; consistency needs an image input [N, H, W, C]".format(_shape(shape)))
    shape = _shape(shape)
    nchw = channels_first(shape)
    n, h, w, c = (shape[0], shape[2], shape[3], shape[1]) if nchw else tuple(shape)
    if h is None or w is None:
        raise DeployError("input has a dynamic height/width (shape {}); give the model a fixed image size".format(_shape(shape)))
    image = image_input([("input", (n, h, w, c or 3))])
    if image is None:
        raise DeployError("input has shape {}; consistency needs an image input [N, H, W, C] of positive "
                          "sizes".format(_shape(shape)))
    from pipeline.data.samples import sample_images

    _, h, w, c = image
    pixels, source = sample_images(dataset, samples, (h, w), seed, channels=c)
    if dataset is None:
        source += ": no --dataset given"
    return (pixels.transpose(0, 3, 1, 2) if nchw else pixels), source


def check_model(model_path, batch_sizes=(2, 8), samples=4, dataset=None, tolerance=ATOL, seed=0,
                time_limit_s=TIME_LIMIT_S, progress=None, rtol=RTOL):
    """``deploy consistency`` on the model file at ``model_path`` (frozen graph or ONNX): the report,
    with the first divergence when a TensorFlow graph fails. ``tolerance`` and ``rtol``: numeric.diff's
    atol and rtol (the CLI's --atol, --rtol). ``progress``: a pipeline.progress.Progress told each step that
    runs long (reading, the runs with their estimate and images done, the divergence search). DeployError for
    bad input."""
    from pathlib import Path

    from pipeline.backends import open_session
    from pipeline.progress import Progress

    path = Path(model_path)
    if samples < 1 or tolerance < 0 or rtol < 0:
        raise DeployError("--samples must be 1 or more, --atol and --rtol 0 or more (got {}, {}, {})".format(
            samples, tolerance, rtol))
    progress = progress or Progress("quiet")
    with progress.step("consistency: reading {}".format(path)):
        session = open_session(path)
        images, source = _images(_ImageInput(session, str(path)).input_shape, samples, dataset, seed)
    with progress.step("consistency: {} image(s) alone and in batches of {}".format(
            len(images), ", ".join(str(b) for b in sorted(set(batch_sizes))))) as step:
        report = batch_consistency(session, images, batch_sizes, tolerance=tolerance, rtol=rtol, seed=seed,
                                   source=source, model=str(path), time_limit_s=time_limit_s, progress=step.note)
    if not report.passed and session.name == "tensorflow":
        with progress.step("consistency: inconsistent; looking for the first layer that diverges"):
            diagnose(report, path, images, tolerance, rtol)
    return report
