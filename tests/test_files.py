"""pipeline.files: the garbage collector paused for a block, the one place that does it."""

import gc

import pytest

from pipeline.files import gc_paused


def test_gc_paused_restores_what_it_found_even_on_an_error():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("x")
    assert gc.isenabled()
    with gc_paused(pause=False):  # a stage that opts out (train)
        assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
