"""A concurrency limiter with priorities: one per endpoint, shared by every document and pipeline."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .types import Priority


class PriorityLimiter:
    """At most `capacity` holders at once; waiters are served by priority, then in arrival order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.active = 0
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def queued(self) -> int:
        return sum(1 for _, _, future in self._waiting if not future.done())

    async def acquire(self, priority: Priority = Priority.BACKGROUND) -> None:
        if self.active < self.capacity and not self.queued:
            self.active += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (int(priority), next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed to us just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)  # the slot moves to the waiter; `active` is unchanged
                return
        self.active -= 1

    @asynccontextmanager
    async def slot(self, priority: Priority = Priority.BACKGROUND) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()
