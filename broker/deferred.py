"""A response still being made (an acks=all produce waiting for the ISR, a request waiting
out a quota): the handler returns it at once, and the connection awaits ``finish()`` in
turn, so the next request on the connection is read and handled meanwhile."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class Deferred:
    """A response still being made: ``finish()`` returns its body once the wait is over."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], Awaitable[dict]]):
        self.finish = finish
