"""Binding a value to the current context: :class:`ContextStack` and :class:`ContextBinding`.

A binding is entered as a ``with`` block or wraps every call of a decorated function
(plain or ``async def``), and nests: the innermost value wins and the outer one is back
on exit. The stack of bound values lives in a :class:`~contextvars.ContextVar`, not on
the binding object, so it follows asyncio tasks and threads started with a copied
context, and ONE binding object entered by several overlapping tasks pops each task's
own entry on exit (a per-object stack of reset tokens would hand task A the token of
task B). Tenancy (:func:`tulip_memory.tenancy.context.tenant_context`) and the memory manager's
scope (:class:`tulip_memory.manager.scope.ScopeBinding`) are built on it.

Pure Python: importable without Django settings.
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
    """The values bound in the current context, innermost last.

    A tuple in a :class:`~contextvars.ContextVar`, so that pushing or popping never
    changes the value another context sees.
    """

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
        """Remove the innermost entry equal to ``value``: the one its binding pushed,
        also when bindings exit out of order (a ``with`` inside a generator, left open
        across a ``yield`` while its caller enters and leaves its own)."""
        stack = self._var.get()
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == value:
                self._var.set(stack[:index] + stack[index + 1 :])
                return


class ContextBinding(Generic[T]):
    """Push :attr:`value` on :attr:`stack` for a ``with`` block or a decorated function.

    Subclasses set the class attribute ``stack`` and :attr:`value` (in ``__init__``);
    ``__enter__`` returns :meth:`entered`, the value by default. A generator cannot be
    decorated: the value would only be bound while the generator object is created.
    """

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
