"""The built-in extractor: deterministic rules that turn user sentences into typed memories
(a pattern matcher, not a language model; docs/design/extraction.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from tulip_memory.manager.types import MEMORY_KEY_MAX_LENGTH, Memory, MemoryType, latest_per_key
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
# A sentence's clauses: a comma, "and" or "but" before a new subject ("I prefer X and my
# favourite Y is Z") starts a clause, so each fact is read on its own; a list ("Django,
# PostgreSQL and HTMX") has no subject after its commas and stays whole.
_CLAUSE_SPLIT = re.compile(
    r"\s*(?:,\s*(?:and\s+|but\s+)?|\s(?:and|but)\s+)"
    r"(?=(?:i|i'm|i'd|i've|my|we|we're|we've|our|the|please|don't|do not|never|always)\b)",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(what|how|why|when|where|who|whom|which|whose|can|could|would|should|shall|do|does|"
    r"did|is|are|was|were|will|have|has|may|might)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(r"^(if|suppose|supposing|imagine|hypothetically|what if)\b", re.I)

# --- user -----------------------------------------------------------------------------
_NAME = re.compile(r"\b(?i:my name is|my name's|call me)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)")
# "I'm Ada" (or "Hi, this is Ada") introduces the user when a capitalised word ends the
# clause or is followed by "from ..." or an apposition; "this is" only after a greeting,
# as "This is Django." names no one.
_INTRODUCTION = re.compile(
    r"(?:\b(?i:i'm|i am)|^(?i:(?:hi|hello|hey|good (?:morning|afternoon|evening))\b.*\bthis is))"
    r"\s+(?P<name>[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)(?=\s*(?:[,.!]|$)|\s+(?i:from|here)\b)"
)
# Capitalised words after "I'm" that are not names: nationalities, languages, states.
_NOT_NAMES = _words(
    "english french german spanish italian dutch portuguese polish russian chinese japanese "
    "korean indian american canadian british irish scottish swiss swedish norwegian danish "
    "finnish greek turkish brazilian mexican australian ok okay sorry fine back here done "
    "ready sure good glad happy busy new"
)
_ROLE = re.compile(
    r"(?:\b(?:i am|i'm|im|i work as|i'm working as|i am working as)\s+(?:an?|the)\s+"
    r"|^as\s+an?\s+"
    r"|\b(?:i am|i'm)\s+(?-i:[A-Z][\w'-]+),\s+(?:an?|the)\s+"
    r"|\bmy (?:role|job|job title|position) is\s+(?:an?\s+|the\s+)?)"
    r"(?P<role>[\w-]+(?:\s+[\w-]+){0,4}?)"
    r"(?=\s+(?:at|for|in|with|on|who|and|but|so)\b|\s*[,.;!]|\s*$)"
    r"(?:\s+(?:at|for)\s+(?P<org>(?-i:[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})))?",
    re.IGNORECASE,
)
_EMPLOYER = re.compile(
    r"\b(?i:i(?: work| am working|'m working) (?:at|for))\s+"
    r"(?P<org>[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})"
)
_LOCATION = re.compile(
    r"\b(?i:i(?: live| reside|(?: am|'m) (?:based|located|living))\s+in)\s+"
    r"(?P<place>[A-Z][\w.-]*(?:[ ,]+[A-Z][\w.-]*){0,3})"
)
_TIMEZONE = re.compile(
    r"\bmy time ?zone is\s+(?P<tz>[\w/+:-]+)"
    r"|\bi(?:'m| am) in the\s+(?P<zone>[\w/+:-]+)\s+time ?zone\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\bi(?P<negated> don't| do not)?(?: really| strongly| much| definitely)?"
    r"(?P<verb> prefer| like| love| enjoy| hate| dislike| can't stand| cannot stand|'d rather"
    r"| would rather|(?:'m| am)(?P<not_fan> not)? a (?:big |huge )?fan of)"
    r"\s+(?P<object>[^.;!?]+)",
    re.IGNORECASE,
)
_FAVORITE = re.compile(
    r"\bmy (?P<which>favou?rite|preferred)\s+(?P<topic>[\w -]+?)\s+is\s+(?P<value>[^.;!?]+)",
    re.I,
)
_EXPERIENCE = re.compile(
    r"\bi(?:'ve| have) been (?P<doing>writing|using|coding in|programming in|working with)\s+"
    r"(?P<what>[^.;!?]+?)\s+for\s+(?P<span>[^.;!?]+)",
    re.IGNORECASE,
)

# --- feedback -------------------------------------------------------------------------
_CORRECTION_OPENER = re.compile(
    r"^(?:no|nope|wrong|incorrect|actually|not quite|that's not (?:right|correct|what i)|"
    r"that is not (?:right|correct)|that's wrong|that is wrong|that's incorrect|you're wrong)"
    r"\b[\s,.:;!-]*",
    re.IGNORECASE,
)
_INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:don't|do not|never(?! again)|always|stop|avoid|keep|make sure|use|"
    r"prefer|only use|you should|you must)\b",
    re.IGNORECASE,
)
# "Actually I'm not sure yet." opens like a correction but corrects nothing.
_HEDGE = re.compile(r"^(?:i'm not sure|i am not sure|i don't know|i think|i guess)\b", re.I)
_PHATIC = re.compile(
    r"^(?:no (?:worries|problem|thanks|thank you)|no, (?:thanks|thank you)|don't worry|"
    r"never mind|nevermind|not at all|don't mention it)\b",
    re.IGNORECASE,
)
# A confirmation is a sentence made only of these chunks (split on punctuation), at least
# one of them more than a bare interjection: "Exactly, that's it." / "Yes, perfect!".
_INTERJECTION = re.compile(
    r"^(?:yes|yep|yeah|yup|great|good|nice|ok|okay|right|thanks|thank you|thx)$", re.I
)
_CONFIRMATION = re.compile(
    r"^(?:(?:yes|yep|yeah|great|good|nice|ok|okay)\s+)?"
    r"(?:exactly(?: right)?|perfect|that's (?:exactly )?(?:it|right|correct|perfect|what i wanted)|"
    r"that is (?:exactly )?(?:it|right|correct|what i wanted)|that works(?: perfectly)?|this works|"
    r"(?:keep|do) (?:it|that|doing (?:it|that))(?: this way)?|spot on|nailed it|"
    r"good call|works for me)$",
    re.IGNORECASE,
)

# --- project --------------------------------------------------------------------------
# A negation ("we don't use an ORM") is still a fact about the project; "should", "might"
# are not in the adverbs, so a suggestion is not taken for one.
_PROJECT = re.compile(
    r"\b(?:we|we're|we are|we've|our team(?: is)?|the team(?: is)?)\s+"
    r"(?:(?:are|have|now|currently|mostly|also|all|don't|do not|not|no longer)\s+)*"
    r"(?:build(?:s|ing)?|develop(?:s|ing)?|writ(?:e|es|ing)|work(?:s|ing)? on|"
    r"migrat(?:e|es|ed|ing)|mov(?:e|es|ed|ing)|switch(?:es|ed|ing)?|us(?:e|es|ed|ing)|"
    r"deploy(?:s|ed|ing)? (?:to|on)|ship(?:s|ped|ping)?|target(?:s|ed|ing)?|run(?:s|ning)?|"
    r"host(?:s|ed|ing)? on|rel(?:y|ies|ied|ying) on|maintain(?:s|ed|ing)?)\b"
    r"|\b(?:the|this|our)\s+(?:[\w-]+\s+)?(?:project|app|application|service|services|"
    r"codebase|code base|repo|repository|system|backend|frontend|api|product|pipeline|"
    r"servers?|tests|ci|infrastructure|infra|cluster|website|site)\s+"
    r"(?:uses?|runs? on|(?:is|are) written in|(?:is|are) built (?:with|on)|(?:is|are) based on|"
    r"targets?|depends? on|is called|is named|(?:is|are) hosted on|"
    r"(?:is|are) deployed (?:to|on))\b"
    r"|\bour\s+(?:main\s+|primary\s+)?(?:stack|tech stack|goal|database|db|ci|cloud|"
    r"language|framework)\s+is\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:we|we've|we have|the team|our team)\s+(?:have\s+)?"
    r"(?:decided|agreed|chose|picked|settled|opted)\b",
    re.IGNORECASE,
)
# A date of the project: its subject may be possessive ("our project deadline", "my team's
# launch"), and a date-like word must follow, so "the demo is great" dates nothing.
_DATED = re.compile(
    r"\b(?:the|our|my)\s+(?:(?:team|project)(?:'s)?\s+)?"
    r"(?P<what>deadline|release|launch|code freeze|freeze|demo|go-live|mvp|beta)(?:\s+date)?\s+"
    r"(?:is|was|will be|(?:was |has )?moved to|(?:is )?(?:set|scheduled|planned) for|is due|"
    r"falls on|starts|ends)\b"
    r"(?=.*(?:\d|\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
    r"aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|today|tomorrow|tonight|next|end of|q[1-4])\b))",
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


def _clauses(sentence: str) -> list[str]:
    """The clauses of ``sentence`` (itself when it has one), each capitalised."""
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(sentence) if p.strip()]
    return [p[0].upper() + p[1:] for p in parts]


def _memory(memory_type: MemoryType, key: str, content: str, rule: str) -> Memory:
    return Memory(memory_type, key, content, {"source": "heuristic", "rule": rule})


def _name(clause: str) -> str | None:
    if match := _NAME.search(clause):
        return match[1]
    match = _INTRODUCTION.search(clause)
    if match and match["name"].split()[0].lower() not in _NOT_NAMES:
        return match["name"]
    return None


def _user_memories(sentence: str) -> list[Memory]:
    found: list[Memory] = []
    if name := _name(sentence):
        found.append(_memory(MemoryType.USER, "name", f"The user's name is {name}.", "name"))
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
        content = f"The user's time zone is {match['tz'] or match['zone']}."
        found.append(_memory(MemoryType.USER, "timezone", content, "timezone"))
    if match := _FAVORITE.search(sentence):
        which = "preferred" if match["which"].lower() == "preferred" else "favourite"
        topic, value = match["topic"].strip(), match["value"].strip()
        content = f"The user's {which} {topic} is {value}."
        found.append(_memory(MemoryType.USER, _key("favorite", slug(topic)), content, "favorite"))
    elif (match := _PREFERENCE.search(sentence)) and _has_real_object(match["object"]):
        verb = _third_person(match)
        obj = match["object"].strip().rstrip(",")
        content = f"The user {verb} {obj}."
        found.append(_memory(MemoryType.USER, _key("preference", slug(obj)), content, "preference"))
    if match := _EXPERIENCE.search(sentence):
        what, span = match["what"].strip(), match["span"].strip()
        content = f"The user has been {match['doing'].lower()} {what} for {span}."
        key = _key("experience", slug(what))
        found.append(_memory(MemoryType.USER, key, content, "experience"))
    return found


def _third_person(match: re.Match[str]) -> str:
    """The preference's verb after "The user": "prefers", "does not like", "would rather"."""
    verb = match["verb"].strip().lower()
    if "fan of" in verb:
        verb = "like"
        negated = bool(match["not_fan"]) != bool(match["negated"])
    else:
        negated = bool(match["negated"])
    if negated:
        return f"does not {verb}"
    if verb == "'d rather":
        return "would rather"
    # "would rather", "can't stand": already right after "The user".
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
    if opener and not _HEDGE.match(rest) and _content_words(rest) >= 2:
        rest = rest[0].upper() + rest[1:]
        content = f"Correction from the user: {rest}"
        return [_memory(MemoryType.FEEDBACK, _key("rule", slug(rest)), content, "correction")]
    # An instruction may be the whole sentence or a later clause of it ("We use Celery,
    # and please don't suggest RQ.").
    for clause in (sentence, *_clauses(sentence)[1:]):
        if _INSTRUCTION.match(clause) and _content_words(clause) >= 2:
            content = f"The user asked: {clause[0].upper()}{clause[1:]}"
            return [_memory(MemoryType.FEEDBACK, _key("rule", slug(clause)), content, "correction")]
    return []


def _project_memories(sentence: str) -> list[Memory]:
    if match := _DATED.search(sentence):
        what = match["what"].lower()
        key, rule = _DATED_KEYS.get(what, what), "dated"
    elif _DECISION.search(sentence):
        key, rule = _key("decision", slug(sentence)), "decision"
    elif _PROJECT.search(sentence):
        key, rule = _key("fact", slug(sentence)), "fact"
    else:
        return []
    return [_memory(MemoryType.PROJECT, key, f"Project: {sentence}", rule)]


def _reference_memories(sentence: str) -> list[Memory]:
    without_urls = _URL.sub(" ", sentence)
    tickets = [
        *_TICKET.findall(without_urls),
        *(f"#{n}" for n in _TICKET_NUMBER.findall(without_urls)),
    ]
    # (key prefix, key, rule) of each reference the sentence makes.
    refs = [("url", _normalised_url(url), "url") for url in _URL.findall(sentence)]
    refs += [("ticket", ticket.upper(), "ticket") for ticket in tickets]
    refs += [("doc", path.lower(), "document") for path in _DOC_PATH.findall(without_urls)]
    if not refs and (match := _DOC_NAMED.search(sentence)):
        refs.append(("doc", slug(match["name"]), "document"))
    content = f"Reference: {sentence}"
    return [_memory(MemoryType.REFERENCE, _key(*ref[:2]), content, ref[2]) for ref in refs]


def _normalised_url(found: str) -> str:
    url = found.rstrip(".,;:!?")
    return re.sub(r"^https?://(www\.)?", "", url, flags=re.I).rstrip("/").lower()


def _is_statement(sentence: str) -> bool:
    return not (
        sentence.endswith("?") or _QUESTION_START.match(sentence) or _HYPOTHETICAL.match(sentence)
    )


def extract_heuristic(messages: list[Message]) -> list[Memory]:
    """Memories stated by the user in ``messages``; see the module docstring for the rules."""
    found: list[Memory] = []
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
            clauses = _clauses(sentence)
            found += [m for clause in clauses for m in _user_memories(clause)]
            found += _feedback_memories(sentence, previous_assistant)
            found += [m for clause in clauses for m in _project_memories(clause)]
            found += _reference_memories(sentence)
        previous_assistant = None
    return latest_per_key(found)
