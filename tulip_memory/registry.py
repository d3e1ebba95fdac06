"""Build a checkpointer from a string: ``get_checkpointer("provider")`` or ``("provider:hint")``
(the built-in providers: docs/checkpointers.md, "Registry"). ``register_checkpointer`` and
``TULIP_MEMORY["CHECKPOINTERS"]`` add providers (they win, in that order). Pure Python.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tulip_memory.backends.base import BaseCheckpointer

__all__ = [
    "configured_providers",
    "get_checkpointer",
    "list_checkpointers",
    "register_checkpointer",
]

Factory = Callable[..., "BaseCheckpointer"]


def _redis_url(hint: str) -> dict[str, Any]:
    has_scheme = hint.startswith(("redis://", "rediss://", "unix://"))
    return {"url": hint if has_scheme else f"redis://{hint}"}


def _delta_storage(hint: str) -> dict[str, Any]:
    from tulip_memory.delta import ORMDeltaStorage

    return {"storage": ORMDeltaStorage(hint)}


@dataclass(frozen=True)
class _BuiltinProvider:
    """A built-in provider: its class and its hint, the keyword argument the hint gives
    (or a function of it; None: takes none). ``required`` describes a hinted argument the
    class cannot do without."""

    name: str
    target: str  # "module:attribute", imported when the provider is first built
    hint: str | Callable[[str], dict[str, Any]] | None
    required: str | None = None

    def __call__(self, config_hint: str | None = None, **kwargs: Any) -> BaseCheckpointer:
        if config_hint is not None:
            if self.hint is None:
                raise ValueError(
                    f"checkpointer provider {self.name!r} takes no ':hint', got {config_hint!r}"
                )
            kwargs.update(
                {self.hint: config_hint} if isinstance(self.hint, str) else self.hint(config_hint)
            )
        if self.required is not None and self.hint not in kwargs:
            raise ValueError(
                f"the {self.name!r} checkpointer needs {self.required}: "
                f"'{self.name}:<{self.hint}>' or {self.hint}=..."
            )
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)(**kwargs)


_BUILTIN: dict[str, Factory] = {
    provider.name: provider
    for provider in (
        _BuiltinProvider("memory", "tulip_memory.backends:MemoryCheckpointer", None),
        _BuiltinProvider("file", "tulip_memory.backends:FileCheckpointer", "base_dir"),
        _BuiltinProvider("redis", "tulip_memory.backends:RedisCheckpointer", _redis_url),
        _BuiltinProvider("postgresql", "tulip_memory.backends:PostgreSQLCheckpointer", "using"),
        _BuiltinProvider(
            "mysql", "tulip_memory.backends:MySQLCheckpointer", "using", "a Django alias"
        ),
        _BuiltinProvider("opensearch", "tulip_memory.backends:OpenSearchCheckpointer", "hosts"),
        _BuiltinProvider("s3", "tulip_memory.backends:S3Checkpointer", "bucket", "a bucket"),
        _BuiltinProvider("delta", "tulip_memory.delta:DeltaCheckpointer", _delta_storage),
    )
}
_REGISTERED: dict[str, Factory] = {}


def _validate_provider_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a checkpointer provider name must be a non-empty str, got {name!r}")
    if ":" in name:
        raise ValueError(f"a checkpointer provider name cannot contain ':', got {name!r}")
    return name


def configured_providers() -> dict[str, Factory]:
    """The providers of ``TULIP_MEMORY["CHECKPOINTERS"]``, imported (ValueError if unusable)."""
    from django.utils.module_loading import import_string

    from tulip_memory.conf import settings

    configured = settings.CHECKPOINTERS or {}
    if not isinstance(configured, dict):
        raise ValueError(
            'TULIP_MEMORY["CHECKPOINTERS"] must be a dict of provider name -> dotted path, '
            f"got {type(configured).__name__}"
        )
    factories: dict[str, Factory] = {}
    for name, path in configured.items():
        _validate_provider_name(name)
        factories[name] = import_string(path) if isinstance(path, str) else path
    return factories


def _providers() -> dict[str, Factory]:
    return {**_BUILTIN, **configured_providers(), **_REGISTERED}


def register_checkpointer(name: str, factory: Factory) -> None:
    """Register (or replace) provider ``name``; ``factory(**kwargs)`` returns a checkpointer."""
    _validate_provider_name(name)
    if not callable(factory):
        raise ValueError(f"the factory of checkpointer provider {name!r} must be callable")
    _REGISTERED[name] = factory


def list_checkpointers() -> list[str]:
    """Names of the available providers (built-in, from the setting, registered), sorted."""
    return sorted(_providers())


def get_checkpointer(checkpointer_string: str, **kwargs: Any) -> BaseCheckpointer:
    """The checkpointer ``"provider"`` or ``"provider:hint"`` names (ValueError listing the
    available ones)."""
    if not isinstance(checkpointer_string, str) or not checkpointer_string.strip():
        raise ValueError(
            "checkpointer string must be 'provider' or 'provider:hint', "
            f"got {checkpointer_string!r}"
        )
    provider, separator, hint = checkpointer_string.partition(":")
    providers = _providers()
    factory = providers.get(provider)
    if factory is None:
        raise ValueError(
            f"Unknown checkpointer provider {provider!r}. Available providers: "
            f"{sorted(providers)}. Register one with register_checkpointer() or "
            'TULIP_MEMORY["CHECKPOINTERS"].'
        )
    if separator:
        if not hint:
            raise ValueError(f"checkpointer string {checkpointer_string!r} has an empty hint")
        kwargs["config_hint"] = hint
    return factory(**kwargs)
