"""The event-loop watchdog: stalls are logged, and a full garbage collection's survivors
are frozen so the next one does not walk them again (issue 15: at 20,000 partitions every
full collection held a node's loop for up to a second and the quorum lost its leader)."""

from __future__ import annotations

import gc
import logging
import time

import pytest
import trio

from kraft.loop_watchdog import LoopWatchdog, release_frozen


def full_collection_s() -> float:
    started = time.perf_counter()
    gc.collect(2)
    return time.perf_counter() - started


@pytest.fixture
def long_lived_state():
    state = [{"n": n, "list": [n]} for n in range(300_000)]  # ~600k tracked containers
    for replica in state:
        replica["list"].append(replica)  # each in a reference cycle, as long-lived objects often are
    del replica
    yield state
    gc.unfreeze()


@pytest.mark.parametrize("freeze", [True, False])
async def test_a_full_collection_s_survivors_are_not_walked_again(long_lived_state, freeze):
    watchdog = LoopWatchdog(freeze=freeze)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog.run)
        await trio.sleep(0.15)
        first = full_collection_s()  # walks all of it; the survivors are long-lived
        await trio.sleep(0.3)  # a watchdog tick freezes them
        second = full_collection_s()
        nursery.cancel_scope.cancel()
    assert watchdog.full_collections >= 2
    if freeze:
        assert gc.get_freeze_count() >= len(long_lived_state)
        assert second < first / 4, (first, second)
    else:
        assert gc.get_freeze_count() == 0
        assert second > first / 4, (first, second)


async def test_released_objects_are_walked_and_reclaimed_again(long_lived_state):
    watchdog = LoopWatchdog()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watchdog.run)
        await trio.sleep(0.15)
        gc.collect(2)
        await trio.sleep(0.3)
        frozen = gc.get_freeze_count()
        assert frozen >= len(long_lived_state)
        # A replica removed while frozen: its reference cycle is garbage nobody reclaims...
        del long_lived_state[-1]
        assert gc.collect(2) == 0
        release_frozen()  # ...until the replica manager hands the frozen set back
        assert gc.get_freeze_count() == 0
        assert gc.collect(2) >= 1
        nursery.cancel_scope.cancel()


async def test_a_blocked_event_loop_is_reported(caplog):
    watchdog = LoopWatchdog(stall_warn_s=0.3)
    with caplog.at_level(logging.WARNING, logger="kraft.loop_watchdog"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog.run)
            await trio.sleep(0.15)
            time.sleep(0.6)  # a handler that computes instead of yielding
            await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
    assert watchdog.stalls == 1
    assert watchdog.longest_stall_s >= 0.45
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("event loop blocked for") and "ms (" in m for m in messages)
    # ...and, while it was blocked, where: this very function
    assert any("so far, in:" in m and "test_a_blocked_event_loop_is_reported" in m for m in messages)
