"""tulip_memory.core.binding: one ContextVar stack under tenant_context and the manager scopes."""

import asyncio

import pytest

from tulip_memory.core.binding import ContextBinding, ContextStack

_labels: ContextStack[str] = ContextStack("tests_binding_labels")


class _label(ContextBinding[str]):
    stack = _labels

    def __init__(self, value: str) -> None:
        self.value = value


def test_bindings_nest_and_restore():
    assert _labels.top() is None
    with _label("outer") as outer:
        assert outer == "outer"
        with _label("inner"):
            assert _labels.get() == ("outer", "inner")
        assert _labels.top() == "outer"
    assert _labels.get() == ()


def test_one_binding_entered_by_overlapping_tasks_restores_each():
    binding = _label("shared")

    async def task(own: str, gate: asyncio.Event, other: asyncio.Event) -> tuple[str, ...]:
        with _label(own):
            with binding:
                gate.set()
                await other.wait()
            return _labels.get()

    async def main() -> list[tuple[str, ...]]:
        a, b = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task("a", a, b), task("b", b, a))

    assert asyncio.run(main()) == [("a",), ("b",)]


def test_decorates_sync_and_async_functions_but_not_generators():
    @_label("sync")
    def sync() -> str | None:
        return _labels.top()

    @_label("async")
    async def coroutine() -> str | None:
        return _labels.top()

    assert sync() == "sync" and asyncio.run(coroutine()) == "async"
    assert _labels.top() is None
    with pytest.raises(TypeError, match="generator"):

        @_label("gen")
        def gen():
            yield _labels.top()


def test_a_binding_left_open_across_a_yield_removes_its_own_entry():
    """A ``with`` inside a generator stays open while the caller enters and leaves its
    own bindings: each exit removes the entry it pushed, not the innermost one."""

    def rows():
        with _label("generator"):
            yield _labels.get()
            yield _labels.get()

    with _label("caller"):
        produced = rows()
        assert next(produced) == ("caller", "generator")
        with _label("inner"):
            assert next(produced) == ("caller", "generator", "inner")
            with pytest.raises(StopIteration):
                next(produced)  # the generator's binding exits inside the caller's "inner"
            assert _labels.get() == ("caller", "inner")
        assert _labels.get() == ("caller",)
    assert _labels.get() == ()
