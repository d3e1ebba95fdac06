"""The searchable text of a stored value and its Unicode-aware tokenisation.

One tokeniser for every store (InMemoryStore's term match, HolographicStore's FTS5 index
and its HRR vectors, PgMemory's HRR fallback), so that a query matches the same words
everywhere:

- the text is NFKC-normalised and case-folded (``"Straße"`` matches ``"STRASSE"``);
- a token is a run of letters and digits in any script (underscores and punctuation
  separate tokens: ``"dark_theme"`` is ``["dark", "theme"]``);
- scripts written without spaces (Han, Hiragana, Katakana) give one token per character,
  so ``"東京タワー"`` can be found by ``"東京"``.

The searchable text of a value is its string leaves and numbers (dict values, list items,
recursively), not dict keys: ``{"content": "likes tea"}`` is found by ``"tea"``, and
``"content"`` does not match every item.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

__all__ = ["LONG_TEXT_CHARS", "tokenize", "value_text"]

LONG_TEXT_CHARS = 2000
"""Texts at least this long are encoded in a worker thread by the async stores.

Encoding costs up to ~30 µs per distinct word; below this length it takes a few
milliseconds at most and runs inline (a thread hop would cost more than it saves), above it
the event loop stays free for other tasks while the text is encoded.
"""

_CJK = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
_TOKEN = re.compile(rf"{_CJK}|(?:(?!{_CJK})[^\W_])+")


def tokenize(text: str) -> list[str]:
    """The tokens of ``text``, in order (duplicates kept)."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def value_text(value: Any) -> str:
    """The text a search matches for ``value`` (its string and number leaves)."""
    parts: list[str] = []
    _collect(value, parts)
    return " ".join(parts)


def _collect(value: Any, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        parts.append(str(value))
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, parts)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, parts)
