"""The built-in extractor: deterministic rules that turn user sentences into typed memories
(a pattern matcher, not a language model; docs/design/extraction.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from tulip_memory.manager.types import MEMORY_KEY_MAX_LENGTH, Memory, MemoryType
from tulip_memory.messages import Message, Role

__all__ = ["extract_heuristic", "slug"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FILLER = _words(
    "a an the please pls really just very so quite kindly always never also too "
    "i me my we our us you your it its this that these those is are am be to of "
    "and or in on for with at by from as"
)
_PRONOUN_OBJECTS = _words("it that this them those these you him her one so too")

_ROLE_NOUNS = _words(
    "engineer developer programmer scientist analyst manager designer architect student "
    "teacher professor lecturer researcher doctor physician nurse surgeon lawyer attorney "
    "accountant consultant founder cofounder co-founder ceo cto cfo coo cio vp director lead "
    "intern administrator admin sysadmin writer editor journalist marketer recruiter owner "
    "maintainer contributor sre tester librarian pharmacist chef artist photographer "
    "translator specialist officer coordinator technician mechanic electrician pilot "
    "economist statistician mathematician physicist chemist biologist dentist veterinarian "
    "therapist freelancer contractor entrepreneur trader banker salesperson pm"
)

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
_QUESTION_START = re.compile(
    r"^(what|how|why|when|where|who|whom|which|whose|can|could|would|should|shall|do|does|"
    r"did|is|are|was|were|will|have|has|may|might)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(r"^(if|suppose|supposing|imagine|hypothetically|what if)\b", re.I)

# --- user -----------------------------------------------------------------------------
_NAME = re.compile(r"\b(?i:my name is|call me)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")
_ROLE = re.compile(
    r"(?:\b(?:i am|i'm|im|i work as|i'm working as|i am working as)\s+(?:an?|the)\s+"
    r"|^as\s+an?\s+"
    r"|\bmy (?:role|job|job title|position) is\s+(?:an?\s+|the\s+)?)"
    r"(?P<role>[\w-]+(?:\s+[\w-]+){0,4}?)"
    r"(?=\s+(?:at|for|in|with|on|who|and|but|so)\b|\s*[,.;!]|\s*$)"
    r"(?:\s+(?:at|for)\s+(?P<org>(?-i:[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})))?",
    re.IGNORECASE,
)
_EMPLOYER = re.compile(
    r"\b(?i:i (?:work|am working|'m working) (?:at|for))\s+"
    r"(?P<org>[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})"
)
_LOCATION = re.compile(
    r"\b(?i:i (?:live|am based|'m based|am located|'m located|reside)\s+in)\s+"
    r"(?P<place>[A-Z][\w.-]*(?:[ ,]+[A-Z][\w.-]*){0,3})"
)
_TIMEZONE = re.compile(r"\bmy time ?zone is\s+(?P<tz>[\w/+:-]+)", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\bi(?: really| strongly| much| definitely)?"
    r"(?P<verb> prefer| like| love| enjoy| hate| dislike| don't like| do not like| can't stand"
    r"| cannot stand|'d rather| would rather)"
    r"\s+(?P<object>[^.;!?]+)",
    re.IGNORECASE,
)
_FAVORITE = re.compile(r"\bmy favou?rite\s+(?P<topic>[\w -]+?)\s+is\s+(?P<value>[^.;!?]+)", re.I)

# --- feedback -------------------------------------------------------------------------
_CORRECTION_OPENER = re.compile(
    r"^(?:no|nope|wrong|incorrect|actually|not quite|that's not (?:right|correct|what i)|"
    r"that is not (?:right|correct)|that's wrong|that is wrong|that's incorrect|you're wrong)"
    r"\b[\s,.:;!-]*",
    re.IGNORECASE,
)
_INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:don't|do not|never|always|stop|avoid|keep|make sure|please use|use only|"
    r"only use|you should|you must)\b",
    re.IGNORECASE,
)
_PHATIC = re.compile(
    r"^(?:no (?:worries|problem|thanks|thank you)|no, (?:thanks|thank you)|don't worry|"
    r"never mind|nevermind|not at all|don't mention it)\b",
    re.IGNORECASE,
)
# A confirmation is a sentence made only of these chunks (split on punctuation), at least
# one of them more than a bare interjection: "Exactly, that's it." / "Yes, perfect!".
_INTERJECTION = re.compile(r"^(?:yes|yep|yeah|yup|great|good|nice|ok|okay|right)$", re.I)
_CONFIRMATION = re.compile(
    r"^(?:(?:yes|yep|yeah|great|good|nice|ok|okay)\s+)?"
    r"(?:exactly(?: right)?|perfect|that's (?:exactly )?(?:it|right|correct|perfect|what i wanted)|"
    r"that is (?:exactly )?(?:it|right|correct|what i wanted)|that works(?: perfectly)?|this works|"
    r"(?:keep|do) (?:it|that|doing (?:it|that))(?: this way)?|spot on|nailed it|"
    r"good call|works for me)$",
    re.IGNORECASE,
)

# --- project --------------------------------------------------------------------------
_PROJECT = re.compile(
    r"\b(?:we|we're|we are|our team is|the team is|our team)\s+"
    r"(?:are\s+)?(?:building|developing|writing|working on|migrating|moving|"
    r"switching|using|use|deploy(?:ing)? (?:to|on)|shipping|targeting|running)\b"
    r"|\b(?:the|this|our)\s+(?:project|app|application|service|codebase|code base|repo|"
    r"repository|system|backend|frontend|api|product|pipeline)\s+"
    r"(?:uses|runs on|is written in|is built (?:with|on)|is based on|targets|depends on|"
    r"is called|is named|is hosted on|is deployed (?:to|on))\b"
    r"|\bour\s+(?:stack|tech stack|goal|database|db|ci|cloud|main language|language)\s+is\b",
    re.IGNORECASE,
)
_DECISION = re.compile(r"\bwe (?:decided|agreed|chose)\s+(?:to|that|on)\b", re.IGNORECASE)
_DATED = re.compile(
    r"\b(?:the|our)\s+(?P<what>deadline|release|launch|code freeze|freeze|demo|go-live)\s+"
    r"(?:is|will be|was moved to|moved to)\b",
    re.IGNORECASE,
)
_DATED_KEYS = {"code freeze": "freeze", "go-live": "launch"}

# --- reference ------------------------------------------------------------------------
_URL = re.compile(r"https?://[^\s<>()\"']+", re.IGNORECASE)
_TICKET = re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b")
_TICKET_NUMBER = re.compile(r"\b(?:ticket|issue|bug|pr|pull request)\s+#?(\d+)\b", re.IGNORECASE)
_DOC_PATH = re.compile(r"(?<![\w/])(?:[\w.-]+/)*[\w.-]+\.(?:md|rst|pdf|docx?|txt|adoc)\b", re.I)
_DOC_NAMED = re.compile(
    r"\b(?:see|check|read|refer to|documented in|described in|written up in|is in)\s+"
    r"(?:the\s+|our\s+)?(?P<name>[\w -]{2,40}?)\s+"
    r"(?:doc|docs|document|spec|wiki|wiki page|page|runbook|handbook|guide|readme|playbook)\b",
    re.IGNORECASE,
)


def slug(text: str, *, max_words: int = 8) -> str:
    """Lower-case content words of ``text`` joined by ``-`` (filler words dropped)."""
    words = re.findall(r"[a-z0-9+#]+", text.lower().replace("'", ""))
    content = [w for w in words if w not in _FILLER]
    return "-".join((content or words)[:max_words])


def _key(prefix: str, text: str) -> str:
    key = f"{prefix}:{text}" if text else prefix
    if len(key) <= MEMORY_KEY_MAX_LENGTH:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{key[: MEMORY_KEY_MAX_LENGTH - 17]}~{digest}"


def _sentences(text: str) -> Iterable[str]:
    """The sentences of ``text``, each ending with ``.``, ``!`` or ``?``."""
    for raw in _SENTENCE_SPLIT.split(text):
        sentence = raw.strip().rstrip(";,: ")
        if sentence:
            yield sentence if sentence[-1] in ".!?" else f"{sentence}."


def _gist(text: str, limit: int = 200) -> str:
    """The first sentence of ``text`` with three content words ("Got it." is not one)."""
    sentences = list(_sentences(text))
    gist = next((s for s in sentences if _content_words(s) >= 3), sentences[0] if sentences else "")
    return gist if len(gist) <= limit else gist[: limit - 1].rstrip() + "…"


def _memory(memory_type: MemoryType, key: str, content: str, rule: str) -> Memory:
    return Memory(memory_type, key, content, {"source": "heuristic", "rule": rule})


def _user_memories(sentence: str) -> list[Memory]:
    found: list[Memory] = []
    if match := _NAME.search(sentence):
        found.append(_memory(MemoryType.USER, "name", f"The user's name is {match[1]}.", "name"))
    role = _ROLE.search(sentence)
    if role and role["role"].split()[-1].lower() in _ROLE_NOUNS:
        where = f" at {role['org'].rstrip('.')}" if role["org"] else ""
        article = "an" if role["role"][0].lower() in "aeiou" else "a"
        content = f"The user is {article} {role['role']}{where}."
        found.append(_memory(MemoryType.USER, "role", content, "role"))
    elif match := _EMPLOYER.search(sentence):
        content = f"The user works at {match['org'].rstrip('.')}."
        found.append(_memory(MemoryType.USER, "employer", content, "employer"))
    if match := _LOCATION.search(sentence):
        content = f"The user lives in {match['place'].rstrip('.')}."
        found.append(_memory(MemoryType.USER, "location", content, "location"))
    if match := _TIMEZONE.search(sentence):
        content = f"The user's time zone is {match['tz']}."
        found.append(_memory(MemoryType.USER, "timezone", content, "timezone"))
    if match := _FAVORITE.search(sentence):
        topic, value = match["topic"].strip(), match["value"].strip()
        content = f"The user's favourite {topic} is {value}."
        found.append(_memory(MemoryType.USER, _key("favorite", slug(topic)), content, "favorite"))
    elif (match := _PREFERENCE.search(sentence)) and _has_real_object(match["object"]):
        verb = match["verb"].strip().lower().replace("'d rather", "would rather")
        obj = match["object"].strip().rstrip(",")
        content = f"The user {_third_person(verb)} {obj}."
        found.append(_memory(MemoryType.USER, _key("preference", slug(obj)), content, "preference"))
    return found


def _third_person(verb: str) -> str:
    # "would rather", "can't stand": already right after "The user".
    if verb in ("don't like", "do not like"):
        return "does not like"
    return verb if " " in verb else f"{verb}s"


def _has_real_object(obj: str) -> bool:
    words = re.findall(r"[a-z0-9+#]+", obj.lower())
    if not words or (words[0] in _PRONOUN_OBJECTS and len(words) <= 2):
        return False
    return any(w not in _FILLER and w not in _PRONOUN_OBJECTS for w in words)


def _content_words(text: str) -> int:
    return sum(1 for w in re.findall(r"[a-z0-9+#]+", text.lower()) if w not in _FILLER)


def _is_confirmation(sentence: str) -> bool:
    chunks = [c.strip() for c in re.split(r"[,.!;:-]+", sentence) if c.strip()]
    if not chunks or not all(_INTERJECTION.match(c) or _CONFIRMATION.match(c) for c in chunks):
        return False
    return any(_CONFIRMATION.match(c) for c in chunks)


def _feedback_memories(sentence: str, previous_assistant: str | None) -> list[Memory]:
    if _PHATIC.match(sentence):
        return []
    if _is_confirmation(sentence):
        if not previous_assistant:
            return []
        confirmed = _gist(previous_assistant)
        content = f"The user confirmed this approach: {confirmed}"
        return [
            _memory(
                MemoryType.FEEDBACK, _key("confirmed", slug(confirmed)), content, "confirmation"
            )
        ]
    opener = _CORRECTION_OPENER.match(sentence)
    rest = sentence[opener.end() :] if opener else sentence
    if (opener or _INSTRUCTION.match(rest)) and _content_words(rest) >= 2:
        rest = rest[0].upper() + rest[1:]
        content = f"Correction from the user: {rest}" if opener else f"The user asked: {rest}"
        return [_memory(MemoryType.FEEDBACK, _key("rule", slug(rest)), content, "correction")]
    return []


def _project_memories(sentence: str) -> list[Memory]:
    if match := _DATED.search(sentence):
        what = match["what"].lower()
        key = _DATED_KEYS.get(what, what)
        return [_memory(MemoryType.PROJECT, key, f"Project: {sentence}", "dated")]
    if _DECISION.search(sentence):
        return [
            _memory(
                MemoryType.PROJECT,
                _key("decision", slug(sentence)),
                f"Project: {sentence}",
                "decision",
            )
        ]
    if _PROJECT.search(sentence):
        return [
            _memory(
                MemoryType.PROJECT, _key("fact", slug(sentence)), f"Project: {sentence}", "fact"
            )
        ]
    return []


def _reference_memories(sentence: str) -> list[Memory]:
    found: list[Memory] = []
    for found_url in _URL.findall(sentence):
        url = found_url.rstrip(".,;:!?")
        normalised = re.sub(r"^https?://(www\.)?", "", url, flags=re.I).rstrip("/").lower()
        found.append(
            _memory(MemoryType.REFERENCE, _key("url", normalised), f"Reference: {sentence}", "url")
        )
    without_urls = _URL.sub(" ", sentence)
    tickets = [
        *_TICKET.findall(without_urls),
        *(f"#{n}" for n in _TICKET_NUMBER.findall(without_urls)),
    ]
    for ticket in tickets:
        found.append(
            _memory(
                MemoryType.REFERENCE,
                _key("ticket", ticket.upper()),
                f"Reference: {sentence}",
                "ticket",
            )
        )
    for path in _DOC_PATH.findall(without_urls):
        found.append(
            _memory(
                MemoryType.REFERENCE,
                _key("doc", path.lower()),
                f"Reference: {sentence}",
                "document",
            )
        )
    if not found and (match := _DOC_NAMED.search(sentence)):
        key = _key("doc", slug(match["name"]))
        found.append(_memory(MemoryType.REFERENCE, key, f"Reference: {sentence}", "document"))
    return found


def _is_statement(sentence: str) -> bool:
    return not (
        sentence.endswith("?") or _QUESTION_START.match(sentence) or _HYPOTHETICAL.match(sentence)
    )


def extract_heuristic(messages: list[Message]) -> list[Memory]:
    """Memories stated by the user in ``messages``; see the module docstring for the rules."""
    by_key: dict[tuple[MemoryType, str], Memory] = {}
    previous_assistant: str | None = None
    for message in messages:
        if message.role is Role.ASSISTANT:
            previous_assistant = message.content or previous_assistant
            continue
        if message.role is not Role.USER:
            continue
        for sentence in _sentences(message.content):
            if not _is_statement(sentence):
                continue
            found = [
                *_user_memories(sentence),
                *_feedback_memories(sentence, previous_assistant),
                *_project_memories(sentence),
                *_reference_memories(sentence),
            ]
            for memory in found:
                by_key.pop((memory.type, memory.key), None)
                by_key[(memory.type, memory.key)] = memory
        previous_assistant = None
    return list(by_key.values())
