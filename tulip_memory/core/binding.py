"""Binding a value to the current context: :class:`ContextStack` and :class:`ContextBinding`.

A binding is a ``with`` block or a decorated (async) function, and nests. The bound values
live in a ContextVar, not on the binding, so they follow asyncio tasks and one binding
entered by overlapping tasks pops each task's own entry. Pure Python.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from asgiref.sync import iscoroutinefunction

__all__ = ["ContextBinding", "ContextStack"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class ContextStack(Generic[T]):
    """The values bound in the current context, innermost last (an immutable tuple)."""

    def __init__(self, name: str) -> None:
        self._var: ContextVar[tuple[T, ...]] = ContextVar(name, default=())

    def get(self) -> tuple[T, ...]:
        return self._var.get()

    def top(self) -> T | None:
        """The innermost value bound, if any."""
        stack = self._var.get()
        return stack[-1] if stack else None

    def push(self, value: T) -> None:
        self._var.set((*self._var.get(), value))

    def remove(self, value: T) -> None:
        """Remove the innermost entry equal to ``value``, also when bindings exit out of order
        (a ``with`` left open across a generator's ``yield``)."""
        stack = self._var.get()
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == value:
                self._var.set(stack[:index] + stack[index + 1 :])
                return


class ContextBinding(Generic[T]):
    """Push :attr:`value` on :attr:`stack` for a ``with`` block or a decorated function
    (never a generator); ``__enter__`` returns :meth:`entered`."""

    stack: ContextStack[T]
    value: T
    # Names the binding in the error raised when it is asked to decorate a generator.
    generator_error: str = "a context binding cannot decorate a generator; use `with` inside it"

    def entered(self) -> Any:
        return self.value

    def __enter__(self) -> Any:
        self.stack.push(self.value)
        return self.entered()

    def __exit__(self, *exc_info: object) -> None:
        self.stack.remove(self.value)

    def __call__(self, func: F) -> F:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise TypeError(self.generator_error)
        # asgiref's test also accepts callables marked with markcoroutinefunction.
        if iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return sync_wrapper  # type: ignore[return-value]
