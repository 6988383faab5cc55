"""Dynamic batching for a server: requests that arrive close together run through the model as one batch.

Each request submits its items (and the options they share); a single loop collects the waiting requests into a
round and runs it on a worker thread. Requests with other options (say top_k) wait for a later round.

`lanes` rounds may run at once, each on its own thread (the model's forward only reads its weights, and torch
releases the GIL inside every op). One lane is one call at a time, with torch using every core inside it; on a
CPU, lanes of one torch thread each beat that at serving loads: a small GEMM gains ~1.3x from a second thread
(measured [200 x 384] x [384 x 1536], fp32), while a second lane doubles the work in flight, and the Python
around a call overlaps with another lane's arithmetic. While every lane is busy, requests queue for a fuller
round.

How long a round waits for company: the loop expects as many requests as the last round had (the clients that
are sending together), and waits at most `max_wait` after the first one for them. So a lone client's request goes
at once (its last round had one request: nobody else is coming, and a fixed window would only add latency),
while under load the round goes as soon as the usual crowd is in, not at the end of the window. `max_batch_size`
items always end the wait.

A round is then cut into batches of similar length (`length`, an item's size in about-tokens): a padded batch
costs its row count times its longest row, so one long text among short ones would make every row as long as
it. The cut minimises the padded cost plus `call_cost` per extra model call; shortest first, so short requests
are answered first.

A failing batch is re-run one request at a time, so an input that breaks the model fails its own request and
not its batch-mates. With `enabled=False` every request is one call (the "no batching" baseline).

A request whose caller stopped waiting (its `submit` was cancelled: the client left, or its timeout passed) is
dropped from the queue when a round is formed, and from a batch about to run: its items never reach the model.
`items` counts the items that did, `dropped` those that did not.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable


def approx_tokens(item: Any) -> int:
    """An item's size in about-tokens, from its characters (English SentencePiece pieces average ~4 characters;
    +2 for [CLS] and [SEP]): cheap, and only ever used to group items of similar length."""
    if isinstance(item, str):
        return len(item) // 4 + 2
    if isinstance(item, dict):
        return sum(approx_tokens(v) for v in item.values())
    if isinstance(item, (list, tuple)):
        return sum(approx_tokens(v) for v in item)
    return 0


@dataclass
class _Job:
    items: list
    params: dict
    key: str
    future: asyncio.Future
    length: int = 0  # its longest item, in `Batcher.length` units
    arrived: float = field(default_factory=time.perf_counter)


class Batcher:
    def __init__(self, fn: Callable[[list, dict], list], max_batch_size: int = 32, max_wait: float = 0.005,
                 enabled: bool = True, length: Callable[[Any], int] | None = approx_tokens, call_cost: int = 16,
                 wait_when_idle: bool = False, lanes: int = 1):
        """`length`: an item's size for grouping (None: one batch per round, in arrival order); `call_cost`: what
        one more model call costs, in padded rows x length (the per-call overhead, measured at ~16 tokens' worth
        on a 6-layer model); `wait_when_idle`: a lone request also waits its full `max_wait` (the old rule);
        `lanes`: rounds that may run at once (`fn` must then be safe to call from several threads)."""
        if lanes < 1:
            raise ValueError(f"lanes must be at least 1, got {lanes}")
        self.fn, self.max_batch_size, self.max_wait, self.enabled = fn, max_batch_size, max_wait, enabled
        self.length, self.call_cost, self.wait_when_idle, self.lanes = length, call_cost, wait_when_idle, lanes
        self.executor = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="litebert-model")
        self.free_lanes: asyncio.Semaphore | None = None  # (made in start(): in the server's event loop)
        self.running: set[asyncio.Task] = set()  # rounds in flight
        self.queue: list[_Job] = []
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.closing = False
        self.expected = 1  # requests the last round had: how many are likely to come together
        self.batches = 0  # model calls made (for /info and tests)
        self.items = 0  # items given to the model, re-runs of a failed batch included
        self.dropped = 0  # items of cancelled requests, taken off the queue unrun
        self.rounds = 0

    def start(self) -> None:
        self.free_lanes = asyncio.Semaphore(self.lanes)
        self.task = asyncio.get_running_loop().create_task(self._loop())

    async def submit(self, items: list, params: dict) -> list:
        """The results for `items`, in order. Raises what the model call raised for them."""
        future = asyncio.get_running_loop().create_future()
        if not self.enabled:
            return await self._call(items, params)
        length = max(map(self.length, items), default=0) if self.length else 0
        self.queue.append(_Job(items, params, json.dumps(params, sort_keys=True), future, length))
        self.wakeup.set()
        return await future

    async def close(self) -> None:
        """Finish every job already queued, then stop."""
        self.closing = True
        self.wakeup.set()
        if self.task is not None:
            await self.task
        await asyncio.gather(*self.running)
        self.executor.shutdown(wait=True)

    async def _call(self, items: list, params: dict) -> list:
        self.batches += 1
        self.items += len(items)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.fn, items, params)

    async def _loop(self) -> None:
        while True:
            if not self.queue:
                if self.closing:
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            await self.free_lanes.acquire()  # a lane for the next round; while none is free, requests pile up
            jobs = await self._form_round()
            if not jobs:
                self.free_lanes.release()
                continue
            self.rounds += 1
            self.expected = len(jobs)
            round_ = asyncio.get_running_loop().create_task(self._run_round(self.group(jobs)))
            self.running.add(round_)
            round_.add_done_callback(self.running.discard)

    async def _form_round(self) -> list[_Job]:
        """The next round's jobs (none when its first request left), after waiting at most `max_wait` from the
        first one's arrival for as many requests as the last round had."""
        self._drop_cancelled()
        if not self.queue:
            return []
        first = self.queue[0]
        deadline = first.arrived + self.max_wait
        while not self.closing and not self._enough(first.key):
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            self.wakeup.clear()
            try:
                await asyncio.wait_for(self.wakeup.wait(), left)
            except asyncio.TimeoutError:
                break
        self._drop_cancelled()  # (who left while the round waited for company)
        if not self.queue or self.queue[0] is not first:
            return []  # the round's first request left: the next one's own window applies
        return self._take(first.key)

    async def _run_round(self, batches: list[list[_Job]]) -> None:
        try:
            for batch in batches:
                await self._run(batch)
        finally:
            self.free_lanes.release()

    def _drop_cancelled(self) -> None:
        """Take the jobs nobody waits for any more off the queue, counting their items."""
        gone = [j for j in self.queue if j.future.done()]
        if gone:
            self.queue = [j for j in self.queue if not j.future.done()]
            self.dropped += sum(len(j.items) for j in gone)

    def _enough(self, key: str) -> bool:
        """Whether the round for `key` can go now: a full batch, or as many requests as the last round had."""
        jobs = [j for j in self.queue if j.key == key and not j.future.done()]
        if sum(len(j.items) for j in jobs) >= self.max_batch_size:
            return True
        return not self.wait_when_idle and len(jobs) >= self.expected

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

    def group(self, jobs: list[_Job]) -> list[list[_Job]]:
        """The round cut into batches of similar length, shortest first: with the jobs sorted by length, the cut
        that minimises sum over batches of (call_cost + rows x longest row), by dynamic programming over the
        sorted order (a round is at most max_batch_size jobs, so O(n^2) is nothing)."""
        if self.length is None or len(jobs) < 2:
            return [jobs] if jobs else []
        jobs = sorted(jobs, key=lambda j: j.length)  # stable: equal lengths keep arrival order
        n = len(jobs)
        best = [0.0] + [float("inf")] * n  # best[j]: cheapest cut of jobs[:j]
        cut = [0] * (n + 1)  # cut[j]: where the last batch of that cut starts
        for j in range(1, n + 1):
            rows = 0
            for i in range(j - 1, -1, -1):  # the last batch is jobs[i:j]; its longest row is jobs[j-1]
                rows += len(jobs[i].items)
                cost = best[i] + self.call_cost + rows * jobs[j - 1].length
                if cost < best[j]:
                    best[j], cut[j] = cost, i
        batches, j = [], n
        while j > 0:
            batches.append(jobs[cut[j]:j])
            j = cut[j]
        return batches[::-1]

    async def _run(self, jobs: list[_Job]) -> None:
        self.dropped += sum(len(j.items) for j in jobs if j.future.done())  # cancelled while an earlier batch of
        jobs = [j for j in jobs if not j.future.done()]  # its round ran
        if not jobs:
            return
        try:
            results = await self._call([x for j in jobs for x in j.items], jobs[0].params)
        except Exception as exc:
            if len(jobs) == 1:
                _settle(jobs[0].future, exc=exc)
                return
            for job in jobs:  # find the request at fault: each alone
                if job.future.done():  # its caller left meanwhile
                    self.dropped += len(job.items)
                    continue
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
