"""The searchable text of a stored value and its Unicode-aware tokenisation.

One tokeniser for every store (InMemoryStore's BM25 index, HolographicStore's FTS5 index
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

Ranking (InMemoryStore's BM25, HolographicStore's query and HRR vectors) works on *terms*:
the tokens without English stop words (:data:`STOP_WORDS`, after Snowball's and NLTK's
lists, question words included: a question is mostly *what/when/who/did*, and they match
every item), each reduced by the Snowball English stemmer (``likes``/``liked`` → ``like``).
Tokens of other scripts pass through the stemmer unchanged. Measured on LoCoMo
(docs/recall-design.md): stemming and stop words are each worth ~0.06 recall@10.
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
    "search_terms",
    "stem",
    "tokenize",
    "value_text",
]

T = TypeVar("T")

LONG_TEXT_CHARS = 2000
"""Texts at least this long are encoded in a worker thread by the async stores.

Encoding costs up to ~30 µs per distinct word; below this length it takes a few
milliseconds at most and runs inline (a thread hop would cost more than it saves), above it
the event loop stays free for other tasks while the text is encoded.
"""


async def off_loop_when_long(chars: int, work: Callable[[], T]) -> T:
    """``work()``, inline when it handles fewer than :data:`LONG_TEXT_CHARS` characters of
    text, else in a worker thread (``asyncio.to_thread``): what the async stores do with
    every step that tokenises or encodes a value's text, so that a long one never stalls
    the event loop."""
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
    # A long text goes slice by slice, cut at whitespace (no word is split): each C call
    # (normalise, fold, match) holds the GIL for its whole length, so one call over a
    # 200,000-character value would stall every other thread — the event loop of an async
    # store encoding it in a worker thread — for ~12 ms.
    tokens: list[str] = []
    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + _SLICE_CHARS)
        end = space.start() if space else len(text)
        tokens += _TOKEN.findall(unicodedata.normalize("NFKC", text[start:end]).casefold())
        start = end
    return tokens


# One string split (a word list a line each would be 130 lines). The one-letter and
# two-letter fragments (s t d ll m o re ve y don) are what apostrophes leave.
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

# PyStemmer's C build when installed (a dependency), else snowballstemmer's pure Python.
# No cache: PyStemmer stems a word in under a microsecond.
_STEMMER = snowballstemmer.stemmer("english")
if hasattr(_STEMMER, "maxCacheSize"):  # PyStemmer: its cache purge costs more than it saves
    _STEMMER.maxCacheSize = 0


def stem(token: str) -> str:
    """The Snowball English stem of a (case-folded) token."""
    return _STEMMER.stemWord(token)


def search_terms(text: str) -> list[str]:
    """The ranking terms of ``text`` in order (duplicates kept): its tokens without stop
    words, stemmed."""
    # Word by word, not stemWords(list): one C call over a long text would hold the GIL
    # (and stall the event loop of the thread that waits for it) until the end.
    stem_word = _STEMMER.stemWord
    return [stem_word(token) for token in tokenize(text) if token not in STOP_WORDS]


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
