"""Progress output: a line per stage, progress bars for long loops, --quiet and --json.

Human output goes to stderr; with ``--json`` each event is one JSON object per line on stdout.
"""

import json
import os
import sys
import time

AFTER_ENV = "DEPLOY_PROGRESS_AFTER"  # seconds before a step names itself (default 2; 0: every step, at once)
STEP_AFTER = 2.0


def step_after():
    """The threshold of Progress.step: $DEPLOY_PROGRESS_AFTER seconds, else 2."""
    try:
        return max(0.0, float(os.environ.get(AFTER_ENV, STEP_AFTER)))
    except ValueError:
        return STEP_AFTER


class _NoBar:
    def __init__(self, *args, **kwargs):
        self.n = 0

    def update(self, n=1):
        self.n += n

    def set_postfix(self, *args, **kwargs):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Progress:
    """``mode`` is "human" (default), "quiet" or "json".

    Progress bars are drawn on a terminal only (``bars=None``): in a CI log the per-stage and
    per-epoch lines say the same without a screenful of carriage returns.
    """

    def __init__(self, mode="human", stream=None, bars=None):
        self.mode = mode
        self.stream = stream or sys.stderr
        if bars is None:
            isatty = getattr(self.stream, "isatty", None)
            bars = bool(isatty and isatty())
        self.bars = bars

    def log(self, message):
        """A line of progress for a human; nothing in quiet or json mode."""
        if self.mode == "human":
            if "tqdm" in sys.modules:  # keep an open progress bar intact
                sys.modules["tqdm"].tqdm.write(message, file=self.stream)
            else:
                print(message, file=self.stream, flush=True)

    def event(self, kind, **fields):
        """A machine-readable event (json mode only)."""
        if self.mode == "json":
            fields = dict(event=kind, time=round(time.time(), 3), **fields)
            print(json.dumps(fields, sort_keys=True, default=str), file=sys.stdout, flush=True)

    def step(self, message, after=None):
        """A context for one step that may take long: ``message`` goes to stderr once the step has run
        ``after`` seconds (default: ``step_after()``, 2 s; a quick step says nothing), then how long it
        took. Human mode only. ``note(line)`` on the step: a line of detail (an estimate, "image 3/8") shown
        only when the step is slow: at once after it named itself, else the latest note with its name.

            with progress.step("converting model.pb with tf2onnx (1 of 12)") as step:
                ...
                step.note("about 40 s")
        """
        return _Step(self, message, step_after() if after is None else after)

    def bar(self, total=None, desc="", unit="it"):
        """A progress bar (tqdm) for a human on a terminal or log; a no-op otherwise."""
        if self.mode != "human" or not self.bars:
            return _NoBar()
        from tqdm import tqdm

        return tqdm(
            total=total,
            desc="  " + desc,
            unit=unit,
            file=self.stream,
            leave=False,
            mininterval=0.5,
            dynamic_ncols=True,
        )


class _Step:
    """See Progress.step."""

    def __init__(self, progress, message, after):
        import threading

        self.progress, self.message, self.after = progress, message, after
        self.timer, self.said, self.start, self.latest = None, False, 0.0, None
        self.outcome = "done"  # the word of the closing line: a step whose work was refused says so, not "done"
        self.lock = threading.Lock()

    def _say(self):
        with self.lock:
            self.said = True
            self.progress.log(self.message + " ...")
            if self.latest is not None:
                self.progress.log("  " + self.latest)

    def note(self, line):
        """A detail of a slow step (see Progress.step); kept, not shown, while the step is quick."""
        with self.lock:
            if self.said:
                self.progress.log("  " + line)
            else:
                self.latest = line

    def __enter__(self):
        self.start = time.monotonic()
        if self.progress.mode == "human":
            if self.after <= 0:  # every step, at once (DEPLOY_PROGRESS_AFTER=0): no thread
                self._say()
                return self
            import threading

            self.timer = threading.Timer(self.after, self._say)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc):
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()  # no thread left behind (pipeline.check.background forks only without one)
        if self.said and exc[0] is None:
            self.progress.log("{}: {} in {:.1f} s".format(self.message, self.outcome, time.monotonic() - self.start))
        return False
