"""`litebert.batching.Batcher` on its own: when a round goes, how it is cut by length, and whose results go where.

The model function here records the batches it is given and answers each item with a value derived from it, so
each caller can check it got the answers to its own items; the batcher is generic over that function (the real
server's use of it, with a real model, is tests/test_serve.py)."""

import asyncio
import time

import pytest

from litebert.batching import Batcher, _Job, approx_tokens


class Recorder:
    """fn(items, params) -> [item.upper()], recording each call's items; optionally slow (seconds per call)."""

    def __init__(self, seconds: float = 0.0):
        self.calls: list[list] = []
        self.seconds = seconds

    def __call__(self, items, params):
        self.calls.append(list(items))
        time.sleep(self.seconds)
        return [x.upper() for x in items]


def run(coro):
    return asyncio.run(coro)


async def started(batcher: Batcher) -> Batcher:
    batcher.start()
    return batcher


def test_a_lone_request_goes_without_waiting_for_the_window():
    async def main():
        b = await started(Batcher(Recorder(), max_wait=30.0))  # a window no test could sit out
        t0 = time.perf_counter()
        out = await asyncio.wait_for(b.submit(["alone"], {}), 10)
        seconds = time.perf_counter() - t0
        await b.close()
        return out, seconds, b.fn.calls

    out, seconds, calls = run(main())
    assert out == ["ALONE"] and calls == [["alone"]]
    assert seconds < 5  # far below the 30 s window


def test_wait_when_idle_keeps_the_full_window():
    async def main():
        b = await started(Batcher(Recorder(), max_wait=0.3, wait_when_idle=True))
        t0 = time.perf_counter()
        out = await b.submit(["alone"], {})
        seconds = time.perf_counter() - t0
        await b.close()
        return out, seconds

    out, seconds = run(main())
    assert out == ["ALONE"] and seconds >= 0.3


def test_requests_arriving_during_a_call_form_the_next_round_and_the_round_after_waits_for_as_many():
    """While one call runs, 6 requests queue; they go as one round. Then 6 clients again: the round waits for all
    6 (up to the window), even though the first of them finds the model idle."""
    async def main():
        b = await started(Batcher(Recorder(seconds=0.2), max_wait=5.0, length=None))
        first = asyncio.ensure_future(b.submit(["a"], {}))
        await asyncio.sleep(0.05)  # "a" is in the model now
        crowd = [asyncio.ensure_future(b.submit([f"b{i}"], {})) for i in range(6)]
        await asyncio.gather(first, *crowd)
        again = []
        for i in range(6):  # the same 6 clients come back one by one, 20 ms apart
            again.append(asyncio.ensure_future(b.submit([f"c{i}"], {})))
            await asyncio.sleep(0.02)
        results = await asyncio.gather(*again)
        await b.close()
        return results, b.fn.calls

    results, calls = run(main())
    assert calls == [["a"], [f"b{i}" for i in range(6)], [f"c{i}" for i in range(6)]]
    assert results == [[f"C{i}"] for i in range(6)]


def jobs_of(lengths: list[int]) -> list[_Job]:
    return [_Job([f"x{i}"], {}, "{}", None, length) for i, length in enumerate(lengths)]


@pytest.mark.parametrize("lengths, call_cost, expected", [
    # one long text among short ones: alone it costs one call; with them it pads four rows to 52
    ([50, 2, 3, 2, 52], 16, [[2, 2, 3], [50, 52]]),
    ([7, 7, 7, 7], 16, [[7, 7, 7, 7]]),  # nothing to gain by cutting equal lengths
    ([50, 2, 3, 2, 52], 1000, [[2, 2, 3, 50, 52]]),  # calls so dear that one batch is cheapest
    ([1, 10, 100], 0, [[1], [10], [100]]),  # calls free: every length alone
])
def test_length_grouping_forms_the_cheapest_batches(lengths, call_cost, expected):
    b = Batcher(Recorder(), call_cost=call_cost)
    try:
        batches = b.group(jobs_of(lengths))
    finally:
        b.executor.shutdown()
    assert [[j.length for j in batch] for batch in batches] == expected
    # every job exactly once, equal lengths in arrival order
    assert sorted(j.items[0] for batch in batches for j in batch) == sorted(f"x{i}" for i in range(len(lengths)))


def test_grouped_results_return_to_their_callers():
    """Requests of mixed lengths (and item counts) queued behind a busy model: the round is cut by length, run out
    of arrival order, and every caller still gets the answers to its own items, in its order."""
    texts = ["short", "a much longer request text " * 20, "tiny", "also rather long " * 30, "mid-size text here"]

    async def main():
        b = await started(Batcher(Recorder(seconds=0.1), max_wait=5.0, call_cost=4))
        busy = asyncio.ensure_future(b.submit(["busy"], {}))
        await asyncio.sleep(0.03)
        requests = [[t, t + " again"] if i % 2 else [t] for i, t in enumerate(texts)]
        results = await asyncio.gather(*(b.submit(r, {}) for r in requests), busy)
        await b.close()
        return requests, results, b.fn.calls

    requests, results, calls = run(main())
    assert results[:-1] == [[x.upper() for x in r] for r in requests] and results[-1] == ["BUSY"]
    assert len(calls) >= 3  # "busy", then the round cut into at least a short and a long batch
    assert calls[1][0] in ("short", "tiny")  # shortest first


def test_params_keep_requests_apart():
    async def main():
        b = await started(Batcher(lambda items, p: [f"{x}:{p['k']}" for x in items], max_wait=0.05))
        out = await asyncio.gather(b.submit(["a"], {"k": 1}), b.submit(["b"], {"k": 2}), b.submit(["c"], {"k": 1}))
        await b.close()
        return out

    assert run(main()) == [["a:1"], ["b:2"], ["c:1"]]


def test_approx_tokens_grows_with_text():
    assert approx_tokens("word") < approx_tokens("word " * 40)
    assert approx_tokens(("a b", "c d e f")) == approx_tokens("a b") + approx_tokens("c d e f")
    assert approx_tokens({"question": "why?", "context": "because " * 10}) > approx_tokens("because " * 10)


def test_requests_cancelled_while_queued_never_reach_the_model():
    """A call holds the model; five requests queue behind it and three are cancelled (their clients left): the next
    round runs the other two only, and the batcher counts the three items it dropped."""
    async def main():
        b = await started(Batcher(Recorder(seconds=0.3), max_wait=5.0, length=None))
        busy = asyncio.ensure_future(b.submit(["busy"], {}))
        await asyncio.sleep(0.05)  # "busy" is in the model now
        queued = [asyncio.ensure_future(b.submit([f"q{i}"], {})) for i in range(5)]
        await asyncio.sleep(0.05)
        for i in (0, 2, 3):
            queued[i].cancel()
        kept = await asyncio.gather(busy, queued[1], queued[4])
        await b.close()
        return kept, [q.cancelled() for q in queued], b

    kept, cancelled, b = run(main())
    assert kept == [["BUSY"], ["Q1"], ["Q4"]]
    assert cancelled == [True, False, True, True, False]
    assert b.fn.calls == [["busy"], ["q1", "q4"]]
    assert (b.items, b.dropped) == (3, 3)


class Overlap(Recorder):
    """A Recorder that also counts the calls in flight at once (from the executor's threads)."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        import threading

        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def __call__(self, items, params):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return super().__call__(items, params)
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.parametrize("lanes", [1, 2])
def test_lanes_bound_the_rounds_in_flight_and_each_caller_gets_its_own_answers(lanes):
    """With `lanes` lanes, a round forms while another runs (up to `lanes` at once, never more); with one lane,
    calls never overlap. Requests that come while every lane is busy wait for a fuller round."""
    async def main():
        b = await started(Batcher(Overlap(seconds=0.2), max_wait=0.0, length=None, lanes=lanes))
        jobs = []
        for i in range(8):  # a request every 30 ms: each finds the lanes busy or free
            jobs.append(asyncio.ensure_future(b.submit([f"x{i}", f"y{i}"], {})))
            await asyncio.sleep(0.03)
        results = await asyncio.wait_for(asyncio.gather(*jobs), 30)
        await b.close()
        return results, b.fn

    results, fn = run(main())
    assert results == [[f"X{i}", f"Y{i}"] for i in range(8)]
    assert fn.most == lanes
    assert sorted(x for call in fn.calls for x in call) == sorted(f"{c}{i}" for c in "xy" for i in range(8))


def test_close_waits_for_every_lane():
    async def main():
        b = await started(Batcher(Overlap(seconds=0.3), max_wait=0.0, length=None, lanes=2))
        first = asyncio.ensure_future(b.submit(["a"], {}))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(b.submit(["b"], {"k": 1}))
        await asyncio.sleep(0.05)  # both rounds in the model now
        await b.close()
        return first.done() and second.done(), first.result(), second.result(), b.fn.most

    both, a, b_, most = run(main())
    assert both and a == ["A"] and b_ == ["B"] and most == 2


def test_lanes_below_one_are_refused():
    with pytest.raises(ValueError, match="lanes"):
        Batcher(Recorder(), lanes=0)
