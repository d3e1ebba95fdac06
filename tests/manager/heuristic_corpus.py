"""A labelled corpus for the heuristic extractor: utterances and the memory types they state.

Each entry is one user utterance (optionally after an assistant message, which is what
confirmations refer to) and the set of memory types a careful reader would extract.
Negatives (questions, small talk, hypotheticals, third parties, pronoun-only
preferences) expect nothing. ``bench/manager.py`` prints precision and recall per type
over it; tests/manager/test_heuristic.py holds the extractor to a floor on both.
"""

from __future__ import annotations

from dataclasses import dataclass

from tulip_memory.manager import MemoryType
from tulip_memory.manager.heuristic import extract_heuristic
from tulip_memory.messages import Message, Role

U, F, P, R = MemoryType.USER, MemoryType.FEEDBACK, MemoryType.PROJECT, MemoryType.REFERENCE


@dataclass(frozen=True)
class Labelled:
    text: str
    expected: frozenset[MemoryType]
    assistant: str | None = None


def _l(text: str, *types: MemoryType, assistant: str | None = None) -> Labelled:
    return Labelled(text, frozenset(types), assistant)


CORPUS: list[Labelled] = [
    # --- user: roles, names, places, preferences ------------------------------------
    _l("I'm a data scientist at Acme.", U),
    _l("I am a senior backend engineer.", U),
    _l("As a nurse, I often work night shifts.", U),
    _l("My name is Ada Lovelace.", U),
    _l("Call me Grace.", U),
    _l("I work at Globex Corporation.", U),
    _l("I live in Lyon.", U),
    _l("My timezone is Europe/Paris.", U),
    _l("I prefer tabs over spaces.", U),
    _l("I really like short answers with code first.", U),
    _l("I hate long meetings.", U),
    _l("My favourite editor is Helix.", U),
    _l("I'd rather use PostgreSQL than MySQL.", U),
    # --- feedback: corrections and confirmations ------------------------------------
    _l("No, use pytest instead of unittest.", F),
    _l("Actually, the function should return None on a miss.", F),
    _l("Don't add comments to obvious code.", F),
    _l("Never push directly to the main branch.", F),
    _l("Always run the linter before committing.", F),
    _l("That's wrong: the timeout is in milliseconds.", F),
    _l("Stop summarising the diff at the end.", F),
    _l("Exactly, that's it.", F, assistant="I split the migration into two steps. Then I ran it."),
    _l("Perfect!", F, assistant="I used a single bulk insert instead of a loop."),
    _l("Yes, that's right.", F, assistant="The cache key includes the tenant id."),
    # --- project facts ----------------------------------------------------------------
    _l("We're migrating to Django 6 this quarter.", P),
    _l("The project uses Celery with Redis as the broker.", P),
    _l("Our stack is Django, PostgreSQL and HTMX.", P),
    _l("We decided to drop support for Python 3.10.", P),
    _l("The deadline is March 14.", P),
    _l("The backend is written in Go.", P),
    # --- references -------------------------------------------------------------------
    _l("The design doc is at https://docs.example.com/design/memory.", R),
    _l("See the onboarding guide for the setup steps.", R),
    _l("This is tracked in PROJ-1234.", R),
    _l("The steps are in docs/setup.md.", R),
    _l("Ticket #4521 has the full stack trace.", R),
    # --- several types at once ----------------------------------------------------------
    _l("We're building the billing service, spec at https://wiki.example.com/billing.", P, R),
    _l("I'm a product manager and I prefer bullet points.", U),
    # --- negatives ----------------------------------------------------------------------
    _l("Thanks!"),
    _l("Hello there."),
    _l("What's the weather like in Paris?"),
    _l("Can you explain how the cache works?"),
    _l("I'm a bit tired today."),
    _l("I like that."),
    _l("If I were a doctor I would know this."),
    _l("No worries."),
    _l("Don't worry about it."),
    _l("My friend is a teacher."),
    _l("ok"),
    _l("Is the deadline on Friday?"),
    _l("Sounds good, let's continue."),
    _l("Perfect!"),  # a confirmation of nothing: no assistant message before it
    _l("I'd like to see the logs."),
    _l("No."),
    # --- hard cases, labelled by what they state (the heuristic misses or misreads some) --
    _l("I've been writing Rust for five years.", U),
    _l("I don't like emojis in commit messages.", U),
    _l("Please keep answers under 100 words.", F),
    _l("You should use f-strings here.", F),
    _l("We ship a release every Tuesday.", P),
    _l("Our team is using Kubernetes on GKE.", P),
    _l("Actually I'm not sure yet."),
    _l("Never again will I order from there."),
    _l("We are using the meeting room at noon."),
]


def conversation(entry: Labelled) -> list[Message]:
    """The entry as a conversation: the assistant turn (if any), then the user's."""
    before = [Message(Role.ASSISTANT, entry.assistant)] if entry.assistant else []
    return [*before, Message(Role.USER, entry.text)]


def precision_recall(
    corpus: list[Labelled],
) -> dict[MemoryType, tuple[float, float, int, int, int]]:
    """Per type: (precision, recall, true positives, false positives, false negatives)."""
    result = {}
    for memory_type in MemoryType:
        tp = fp = fn = 0
        for entry in corpus:
            predicted = memory_type in {m.type for m in extract_heuristic(conversation(entry))}
            expected = memory_type in entry.expected
            tp += predicted and expected
            fp += predicted and not expected
            fn += expected and not predicted
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        result[memory_type] = (precision, recall, tp, fp, fn)
    return result
