"""The live layer's one cache type (tasksapp/live/cache.py): a value is reused only by a caller
that learnt of a change no later than the work that made it started, never once it failed; at
most `size` values are kept, the oldest dropped first; reuses and kept values are counted in
tasksapp.metrics.live_counts."""

import asyncio

from tasksapp.live.cache import RenderCache, not_failed
from tasksapp.metrics import live_counts


def counts() -> tuple[int, int]:
    return live_counts["test_kept"], live_counts["test_reused"]


def test_a_value_is_reused_only_by_callers_that_learnt_of_the_change_before_it_started() -> None:
    cache: RenderCache[str, str] = RenderCache(size=4, kept="test_kept", reused="test_reused")
    before = counts()
    cache.put("row", "at 10", started=10.0)
    assert cache.get("row", not_before=9.0) == "at 10"
    assert cache.get("row", not_before=10.0) == "at 10"
    assert cache.get("row", not_before=10.5) is None  # learnt of something after it started
    assert cache.get("other", not_before=0.0) is None
    assert cache.get_or_make("row", 10.5, lambda: "again") == "again"
    assert cache.get_or_make("row", 10.5, lambda: "not made") == "again"
    kept, reused = counts()
    assert (kept - before[0], reused - before[1]) == (2, 3)


def test_a_cached_none_is_reused_by_get_or_make() -> None:
    cache: RenderCache[str, int | None] = RenderCache(size=4, kept="test_kept", reused="test_reused")
    made: list[int] = []

    def make() -> int | None:
        made.append(1)
        return None

    assert cache.get_or_make("over the limit", 0.0, make) is None
    assert cache.get_or_make("over the limit", -1.0, make) is None
    assert made == [1]


def test_at_most_size_values_are_kept_and_the_oldest_goes_first() -> None:
    cache: RenderCache[int, int] = RenderCache(size=3, kept="test_kept", reused="test_reused")
    for key in range(3):
        cache.put(key, key, started=float(key))
    cache.put(0, 10, started=10.0)  # kept again: now the newest
    cache.put(3, 3, started=11.0)
    assert len(cache) == 3
    assert [cache.get(key) for key in range(4)] == [10, None, 2, 3]


def test_a_failed_render_is_not_shared() -> None:
    loop = asyncio.new_event_loop()
    try:
        cache: RenderCache[str, asyncio.Future[str]] = RenderCache(
            size=4, kept="test_kept", reused="test_reused", usable=not_failed
        )
        running, failed = loop.create_future(), loop.create_future()
        failed.set_exception(RuntimeError("the database went away"))
        failed.exception()
        cache.put("running", running, started=1.0)
        cache.put("failed", failed, started=1.0)
        assert cache.get("running", 0.0) is running
        assert cache.get("failed", 0.0) is None
        running.set_result("html")
        assert cache.get("running", 0.0) is running
    finally:
        loop.close()
