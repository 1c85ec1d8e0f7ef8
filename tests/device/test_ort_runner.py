"""The one timing loop: ``runners.OrtModel.time`` (per-call wall times, warm-up, iterations or duration,
progress in chunks) and ``loop`` (back-to-back, throughput), on a stand-in session that counts and sleeps."""

import time

import pytest

from pipeline.device.agent.runners import OrtModel


class Session:
    def __init__(self, sleep_first=0, sleep_s=0.0, fail=False):
        self.calls = 0
        self.sleep_first, self.sleep_s, self.fail = sleep_first, sleep_s, fail

    def run(self, names, feed):
        self.calls += 1
        if self.fail:
            raise RuntimeError("bad input")
        if self.calls <= self.sleep_first:
            time.sleep(self.sleep_s)
        return []


class Bar:
    def __init__(self):
        self.updates = []

    def __call__(self, n):
        self.updates.append(n)


def model(**kw):
    m = OrtModel.__new__(OrtModel)  # no ONNX Runtime: the session is the stand-in
    m.session = Session(**kw)
    return m


def totals(calls):
    return [c["total_ms"] for c in calls]


def test_counts_calls_and_warmup():
    m = model()
    calls = m.time({}, 3, 7)
    assert m.session.calls == 10 and len(calls) == 7
    assert all(set(c) == {"total_ms"} and c["total_ms"] >= 0 for c in calls)


def test_warmup_not_timed():
    m = model(sleep_first=2, sleep_s=0.03)  # the 2 warm-up calls are slow, the rest instant
    assert max(totals(m.time({}, 2, 5))) < 20


def test_times_the_call():
    assert all(t >= 5 for t in totals(model(sleep_first=10 ** 9, sleep_s=0.005).time({}, 0, 3)))


def test_progress_gets_every_call_in_chunks():
    bar = Bar()
    calls = model().time({}, 5, 10000, progress=bar)
    assert sum(bar.updates) == len(calls) == 10000
    assert len(bar.updates) < 100  # in chunks, not once per call


def test_duration_ignores_iterations():
    m = model(sleep_first=10 ** 9, sleep_s=0.002)
    t0 = time.perf_counter()
    calls = m.time({}, 1, 1, duration_s=0.05)
    assert m.session.calls == len(calls) + 1 and len(calls) > 1
    assert sum(totals(calls)) >= 40 and time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("progress", [None, Bar()])
def test_duration_at_least_one_call(progress):
    m = model(sleep_first=10 ** 9, sleep_s=0.02)
    calls = m.time({}, 0, 100, duration_s=0.001, progress=progress)
    assert len(calls) == 1 and m.session.calls == 1
    if progress is not None:
        assert sum(progress.updates) == 1


def test_duration_progress_total():
    bar = Bar()
    calls = model().time({}, 0, 1, duration_s=0.05, progress=bar)
    assert sum(bar.updates) == len(calls) > 1


def test_errors_propagate():
    with pytest.raises(RuntimeError, match="bad input"):
        model(fail=True).time({}, 0, 3)


def test_loop_is_the_wall_time_of_back_to_back_calls():
    m = model(sleep_first=10 ** 9, sleep_s=0.002)
    seconds = m.loop({}, 10)
    assert m.session.calls == 10 and 0.02 <= seconds < 0.5


def test_close_is_idempotent():
    m = model()
    m.close()
    m.close()
    assert m.session is None
