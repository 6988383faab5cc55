"""Dynamic batching for a server: requests that arrive close together run through the model as one batch.

Each request submits its items (and the options they share); a single loop takes the first waiting request,
then keeps collecting until `max_batch_size` items are waiting or `max_wait` has passed since that first one,
and runs them in one call on a worker thread (one call at a time: the model is not re-entrant, and torch
already uses every core inside one call). Requests with other options (say top_k) wait for a later batch.

A failing batch is re-run one request at a time, so an input that breaks the model fails its own request and
not its batch-mates. With `enabled=False` every request is one call (the "no batching" baseline).
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class _Job:
    items: list
    params: dict
    key: str
    future: asyncio.Future
    arrived: float = field(default_factory=time.perf_counter)


class Batcher:
    def __init__(self, fn: Callable[[list, dict], list], max_batch_size: int = 32, max_wait: float = 0.005,
                 enabled: bool = True):
        self.fn, self.max_batch_size, self.max_wait, self.enabled = fn, max_batch_size, max_wait, enabled
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="litebert-model")
        self.queue: list[_Job] = []
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.closing = False
        self.batches = 0  # model calls made (for /info and tests)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._loop())

    async def submit(self, items: list, params: dict) -> list:
        """The results for `items`, in order. Raises what the model call raised for them."""
        future = asyncio.get_running_loop().create_future()
        if not self.enabled:
            return await self._call(items, params)
        self.queue.append(_Job(items, params, json.dumps(params, sort_keys=True), future))
        self.wakeup.set()
        return await future

    async def close(self) -> None:
        """Finish every job already queued, then stop."""
        self.closing = True
        self.wakeup.set()
        if self.task is not None:
            await self.task
        self.executor.shutdown(wait=True)

    async def _call(self, items: list, params: dict) -> list:
        self.batches += 1
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.fn, items, params)

    async def _loop(self) -> None:
        while True:
            if not self.queue:
                if self.closing:
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            first = self.queue[0]
            deadline = first.arrived + self.max_wait
            while self._waiting(first.key) < self.max_batch_size and not self.closing:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                self.wakeup.clear()
                try:
                    await asyncio.wait_for(self.wakeup.wait(), left)
                except asyncio.TimeoutError:
                    break
            await self._run(self._take(first.key))

    def _waiting(self, key: str) -> int:
        return sum(len(j.items) for j in self.queue if j.key == key)

    def _take(self, key: str) -> list[_Job]:
        """Jobs with this key, oldest first, up to max_batch_size items (the first job always goes)."""
        taken, count = [], 0
        for job in list(self.queue):
            if job.key != key or (taken and count + len(job.items) > self.max_batch_size):
                continue
            taken.append(job)
            count += len(job.items)
            self.queue.remove(job)
        return taken

    async def _run(self, jobs: list[_Job]) -> None:
        jobs = [j for j in jobs if not j.future.done()]  # a timed-out request was cancelled: skip its items
        if not jobs:
            return
        try:
            results = await self._call([x for j in jobs for x in j.items], jobs[0].params)
        except Exception as exc:
            if len(jobs) == 1:
                _settle(jobs[0].future, exc=exc)
                return
            for job in jobs:  # find the request at fault: each alone
                try:
                    _settle(job.future, await self._call(job.items, job.params))
                except Exception as one:
                    _settle(job.future, exc=one)
            return
        start = 0
        for job in jobs:
            _settle(job.future, results[start:start + len(job.items)])
            start += len(job.items)


def _settle(future: asyncio.Future, result: Any = None, exc: BaseException | None = None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
