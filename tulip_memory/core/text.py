"""The searchable text of a stored value and the one tokeniser every store uses.

Text is NFKC-normalised and case-folded; a token is a run of letters and digits in any
script, one per character in scripts written without spaces. A value's text is its string
and number leaves, not its dict keys. Ranking uses :func:`search_terms`: tokens without
English stop words, Snowball-stemmed (docs/design/recall.md).
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Callable
from typing import Any, TypeVar

import snowballstemmer

__all__ = [
    "LONG_TEXT_CHARS",
    "STOP_WORDS",
    "has_words",
    "off_loop_when_long",
    "one_line",
    "search_terms",
    "stem",
    "tokenize",
    "value_text",
]

T = TypeVar("T")

LONG_TEXT_CHARS = 2000
"""Texts at least this long are encoded in a worker thread by the async stores; a shorter
one runs inline, where a thread hop would cost more than it saves."""


async def off_loop_when_long(chars: int, work: Callable[[], T]) -> T:
    """``work()`` inline for short text, in a worker thread from :data:`LONG_TEXT_CHARS`
    characters, so that a long value never stalls the event loop."""
    if chars < LONG_TEXT_CHARS:
        return work()
    return await asyncio.to_thread(work)


_CJK = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
_TOKEN = re.compile(rf"{_CJK}|(?:(?!{_CJK})[^\W_])+")
_SPACE = re.compile(r"\s")
_SLICE_CHARS = 8192


def has_words(text: str) -> bool:
    """Whether ``text`` has a token (:func:`tokenize`): what the stores embed."""
    return _TOKEN.search(text) is not None or bool(tokenize(text))


def tokenize(text: str) -> list[str]:
    """The tokens of ``text``, in order (duplicates kept)."""
    if len(text) <= _SLICE_CHARS:
        return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())
    # Slice by slice, cut at whitespace: each C call holds the GIL for its whole length,
    # which would stall the event loop waiting on this worker thread.
    tokens: list[str] = []
    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + _SLICE_CHARS)
        end = space.start() if space else len(text)
        tokens += _TOKEN.findall(unicodedata.normalize("NFKC", text[start:end]).casefold())
        start = end
    return tokens


# The one- and two-letter fragments are what apostrophes leave.
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing would should could ought a an the and but if or because as until while of
    at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why
    how all any both each few more most other some such no nor not only own same so than too
    very s t can will just don now d ll m o re ve y
    """.split()  # noqa: SIM905
)

# PyStemmer's C build when installed, else snowballstemmer's pure Python.
_STEMMER = snowballstemmer.stemmer("english")
if hasattr(_STEMMER, "maxCacheSize"):  # PyStemmer: its cache purge costs more than it saves
    _STEMMER.maxCacheSize = 0


def stem(token: str) -> str:
    """The Snowball English stem of a (case-folded) token."""
    return _STEMMER.stemWord(token)


def search_terms(text: str) -> list[str]:
    """The ranking terms of ``text`` in order, duplicates kept."""
    # Word by word: one C call over a long text would hold the GIL until the end.
    stem_word = _STEMMER.stemWord
    return [stem_word(token) for token in tokenize(text) if token not in STOP_WORDS]


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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
