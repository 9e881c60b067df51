"""The final drain of the queue and txn workloads: read every key back to a target offset.

After the nemesis healed everything, a fresh process assigns every key still short of its
target from the beginning and polls until each key has been read up to its target (the
highest offset any ok operation saw), or the deadline passes.  A failed ``assign`` or poll
retires the process; the next round starts a fresh one with only the keys still short.
The workloads differ only in which operation polls and where its ok value keeps the
records, so they pass both in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from jepsen.history import INFO, OK
from jepsen.workloads.clients import classify, invoke_bounded


async def read_to_targets(workload, bootstrap: str, targets: dict[int, int],
                          poll: tuple[str, Any], polled: Callable[[Any], dict],
                          record: Callable[..., Any], new_process: Callable[[], Any],
                          deadline: float,
                          say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Polls fresh clients of ``workload`` until every key reaches its target offset.

    Args:
        targets: key -> the offset the drain must read up to.
        poll: the ``(f, value)`` of the workload's poll operation.
        polled: an ok poll's value -> ``{key: [[offset, value], ...]}``.
        record: ``record(process, type, f, value, error=None)`` appends a history record.
        new_process: hands out a fresh process number.
        deadline: ``time.monotonic()`` at which the drain gives up.
        say: progress lines for the operator.

    Returns:
        ``{"targets", "reached", "complete"}`` (keys as strings, for JSON).
    """
    import trio

    keys = sorted(targets)
    reached: dict[int, int] = {k: -1 for k in keys}
    client, process = None, None

    async def run(f, value):
        record(process, "invoke", f, value)
        t, v, err, abandoned = await invoke_bounded(workload, client, f, value,
                                                    getattr(workload, "timeout_s", 5.0))
        record(process, t, f, v, err)
        return t, v, abandoned

    while keys and time.monotonic() < deadline:
        if client is None:
            process = new_process()
            try:
                client = await trio.to_thread.run_sync(workload.open_client, bootstrap,
                                                       process)
            except Exception as exc:  # noqa: BLE001
                say(f"drain: cannot open a client: {exc}")
                await trio.sleep(1)
                continue
            left = [k for k in keys if reached[k] < targets[k]]
            record(process, "invoke", "assign", left)
            try:
                await trio.to_thread.run_sync(lambda: client.assign(left, from_start=True))
                record(process, OK, "assign", left)
            except Exception as exc:  # noqa: BLE001
                record(process, INFO, "assign", left, classify(exc)[1])
                await trio.to_thread.run_sync(_close, client)
                client = None
            continue
        t, v, abandoned = await run(*poll)
        if t != OK:
            if not abandoned:
                await trio.to_thread.run_sync(_close, client)
            client = None
            continue
        for k, pairs in polled(v).items():
            if pairs and k in reached:
                reached[k] = max(reached[k], pairs[-1][0])
        if all(reached[k] >= targets[k] for k in keys):
            break
    if client is not None:
        await trio.to_thread.run_sync(_close, client)
    complete = all(reached[k] >= targets[k] for k in keys)
    return {"targets": {str(k): v for k, v in targets.items()},
            "reached": {str(k): v for k, v in reached.items()}, "complete": complete}


def _close(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass
