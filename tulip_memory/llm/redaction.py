"""Secret redaction: likely secrets replaced by ``[REDACTED:<kind>]`` before text leaves.

A :class:`RedactionPolicy` picks the detectors (:data:`DETECTORS`; docs/llm.md says what
each takes), extra patterns, allowed values and the replacement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DETECTORS", "Redaction", "RedactionPolicy", "Redactor"]

_SEGMENT = re.compile(r"[A-Za-z0-9]{16,}")


def _looks_random(value: str) -> bool:
    """Letters and digits, with one separator-free run of 16+ characters."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and _SEGMENT.search(value) is not None
    )


def _luhn(digits: str) -> bool:
    doubled = (sum(divmod(int(c) * (1 + i % 2), 10)) for i, c in enumerate(reversed(digits)))
    return sum(doubled) % 10 == 0


# Words that describe a password rather than being one ("the password is required").
_PASSWORD_WORDS = frozenset(
    re.findall(
        r"\S+",
        """a an the my your our their its not no required incorrect wrong correct invalid valid
        expired empty missing weak strong too very long short secure insecure changed reset set
        new old same different mandatory optional case-sensitive saved stored hashed encrypted
        protected needed incomplete ok fine good bad forgotten lost""",
    )
)

# (pattern, group holding the secret (0: the whole match), extra test of that group).
_Rule = tuple[re.Pattern[str], int, Callable[[str], bool] | None]

_RULES: dict[str, list[_Rule]] = {
    "private_key": [
        (
            re.compile(
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
                r".*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
                re.DOTALL,
            ),
            0,
            None,
        )
    ],
    "api_key": [
        (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), 0, _looks_random),
        (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"), 0, None),
        (re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AGPA)[0-9A-Z]{16}\b"), 0, None),
        (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0, None),
        (re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0, None),
        (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), 0, None),
    ],
    "jwt": [
        (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0, None)
    ],
    "bearer": [(re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/=-]{16,})"), 1, _looks_random)],
    "url_credentials": [
        (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]+:([^\s/@]+)@"), 1, None)
    ],
    "secret_assignment": [
        (
            re.compile(
                r"(?i)\b(?:api[_ -]?key|access[_ -]?key|access[_ -]?token|auth[_ -]?token|"
                r"refresh[_ -]?token|secret[_ -]?key|client[_ -]?secret|token|secret)"
                r"\s*(?:[:=]|\bis\b|\bwas\b)\s*[\"']?([A-Za-z0-9._~+/=-]{12,})"
            ),
            1,
            _looks_random,
        )
    ],
    "password": [
        (
            re.compile(
                r"(?i)\b(?:password|passwd|pwd|passphrase|passcode|pin)\b"
                r"(?:\s*[:=]\s*|\s+(?:is|was|to|of)\s+)[\"']?([^\s\"']+?)[\"']?(?=[.,;!?]?(?:\s|$))"
            ),
            1,
            lambda value: value.lower().strip(".,;!?") not in _PASSWORD_WORDS,
        )
    ],
    "card_number": [
        (
            re.compile(r"(?<![\d-])[2-6]\d{3}(?:[ -]?\d){9,15}(?![\d-])"),
            0,
            lambda value: _luhn(re.sub(r"\D", "", value)),
        )
    ],
}

DETECTORS: tuple[str, ...] = tuple(_RULES)


@dataclass(frozen=True)
class RedactionPolicy:
    """Which secrets are redacted, and how (see the module docstring).

    Args:
        detectors: names from :data:`DETECTORS` (all of them by default).
        extra_patterns: ``{kind: regex}`` redacted too (group 1 if the regex has one,
            else the whole match).
        allow: regexes; a finding that one of them matches in full is kept.
        replacement: the text put in place of a secret; ``{kind}`` is its detector.
    """

    detectors: tuple[str, ...] = DETECTORS
    extra_patterns: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] = ()
    replacement: str = "[REDACTED:{kind}]"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.detectors) - set(DETECTORS))
        if unknown:
            raise ValueError(f"detectors has unknown names {unknown}; known: {list(DETECTORS)}")
        if not isinstance(self.extra_patterns, dict):
            raise ValueError("extra_patterns must be a dict {kind: regex}")
        for kind, pattern in self.extra_patterns.items():
            _compile(pattern, f"extra_patterns[{kind!r}]")
        for pattern in self.allow:
            _compile(pattern, "allow[]")
        if not isinstance(self.replacement, str):
            raise ValueError(f"replacement must be a str, got {type(self.replacement).__name__}")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RedactionPolicy:
        """A policy from ``TULIP_MEMORY["LLM"]["REDACTION"]`` (``DETECTORS``,
        ``EXTRA_PATTERNS``, ``ALLOW``, ``REPLACEMENT``)."""
        known = {"DETECTORS", "EXTRA_PATTERNS", "ALLOW", "REPLACEMENT"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"TULIP_MEMORY['LLM']['REDACTION'] has unknown keys {unknown}; "
                f"known: {sorted(known)}"
            )
        return cls(
            detectors=tuple(options.get("DETECTORS", DETECTORS)),
            extra_patterns=dict(options.get("EXTRA_PATTERNS", {})),
            allow=tuple(options.get("ALLOW", ())),
            replacement=options.get("REPLACEMENT", "[REDACTED:{kind}]"),
        )


def _compile(pattern: object, what: str) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ValueError(f"{what} must be a regex string, got {type(pattern).__name__}")
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{what} is not a valid regex: {error}") from None


@dataclass(frozen=True)
class Redaction:
    """Redacted text, the kinds of the secrets taken out, and those secrets (for a caller
    to refuse where no detector would see them, e.g. a key the model built from one): left
    out of ``repr``, so that logging a ``Redaction`` never logs a secret."""

    text: str
    kinds: list[str]
    secrets: list[str] = field(default_factory=list, repr=False)


class Redactor:
    """Applies a :class:`RedactionPolicy` to text and JSON-like values."""

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        self.policy = policy or RedactionPolicy()
        self._rules: list[tuple[str, _Rule]] = [
            (kind, rule) for kind in self.policy.detectors for rule in _RULES[kind]
        ]
        for kind, pattern in self.policy.extra_patterns.items():
            compiled = re.compile(pattern)
            self._rules.append((kind, (compiled, 1 if compiled.groups else 0, None)))
        self._allow = [re.compile(pattern) for pattern in self.policy.allow]
        # "secret": the kind of a string taken out because an earlier redaction found it.
        kinds = {kind for kind, _ in self._rules} | {"secret"}
        stubs = {self.policy.replacement.format(kind=kind) for kind in kinds} - {""}
        ordered = sorted(stubs, key=lambda stub: (-len(stub), stub))
        self._stub = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def stub_in(self, text: str) -> str | None:
        """The first replacement this policy puts in place of a secret that ``text``
        holds (e.g. ``"[REDACTED:password]"``), or ``None`` (always with an empty
        replacement)."""
        found = self._stub.search(text) if self._stub is not None else None
        return found.group() if found else None

    def redact(self, text: str) -> Redaction:
        """``text`` with every finding replaced."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        spans = sorted(self._findings(text), key=lambda s: (s[0], -s[1]))
        pieces: list[str] = []
        kinds: list[str] = []
        secrets: list[str] = []
        position = 0
        for start, end, kind in spans:
            if start < position:  # inside a finding already replaced
                continue
            pieces.append(text[position:start])
            pieces.append(self.policy.replacement.format(kind=kind))
            kinds.append(kind)
            secrets.append(text[start:end])
            position = end
        pieces.append(text[position:])
        return Redaction("".join(pieces), kinds, secrets)

    def _findings(self, text: str) -> Iterable[tuple[int, int, str]]:
        for kind, (pattern, group, accept) in self._rules:
            for match in pattern.finditer(text):
                secret = match.group(group)
                if not secret or (accept is not None and not accept(secret)):
                    continue
                if any(allowed.fullmatch(secret) for allowed in self._allow):
                    continue
                yield match.start(group), match.end(group), kind

    def redact_value(self, value: Any) -> tuple[Any, list[str]]:
        """A copy of a JSON-like value with every string redacted, and the kinds found."""
        if isinstance(value, str):
            redaction = self.redact(value)
            return redaction.text, redaction.kinds
        if isinstance(value, dict):
            pairs = [(key, self.redact_value(item)) for key, item in value.items()]
            return {key: item for key, (item, _) in pairs}, [k for _, (_, ks) in pairs for k in ks]
        if isinstance(value, (list, tuple)):
            found = [self.redact_value(item) for item in value]
            return [item for item, _ in found], [k for _, ks in found for k in ks]
        return value, []
