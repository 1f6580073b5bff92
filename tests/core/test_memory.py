"""The cycle collector paused for a block, and left as it was found."""
from __future__ import annotations

import gc

import pytest

from core.memory import no_cycle_collection


def test_paused_inside_and_restored_after_even_on_error():
    assert gc.isenabled()
    with no_cycle_collection():
        assert not gc.isenabled()
        with no_cycle_collection():  # nested: the inner block leaves it paused for the outer one
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), no_cycle_collection():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused():
    gc.disable()
    try:
        with no_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
