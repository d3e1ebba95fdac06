"""The summary message SummarizingManager writes, and the digest used without a summarize_fn.

A summary is one SYSTEM message starting ``[Summary of previous conversation (N messages)]:``,
N the original messages it stands for, also kept in ``metadata["tulip_memory_summary"]``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tulip_memory.core.numbers import is_int
from tulip_memory.core.text import one_line
from tulip_memory.messages import Message, Role

SUMMARY_METADATA_KEY = "tulip_memory_summary"
SUMMARY_HEADER = "[Summary of previous conversation ({count} messages)]:\n"

# Bounds of the fallback summary, so that it stays small however long the history is.
_REQUEST_CHARS = 500  # the conversation's first user message
_QUOTE_CHARS = 200  # a message quoted in a span
_EARLIER_SUMMARY_CHARS = 400  # an earlier summary not written by the fallback
_SPANS_CHARS = 1600  # the span lines together (the newest span is always kept)
_TOOLS_LISTED = 8
_TOOL_NAME_CHARS = 64


def summary_message(text: str, covered: int) -> Message:
    """The SYSTEM message standing for ``covered`` earlier messages."""
    return Message(
        role=Role.SYSTEM,
        content=SUMMARY_HEADER.format(count=covered) + text,
        metadata={SUMMARY_METADATA_KEY: covered},
    )


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary written by SummarizingManager."""
    covered = message.metadata.get(SUMMARY_METADATA_KEY)
    return message.role == Role.SYSTEM and is_int(covered) and covered > 0


def covered_count(message: Message) -> int:
    """How many original messages ``message`` stands for (1 unless it is a summary)."""
    return message.metadata[SUMMARY_METADATA_KEY] if is_summary(message) else 1


def summary_text(message: Message) -> str:
    """The text of a summary message, without its header line."""
    header, _, text = message.content.partition("\n")
    return text if header.startswith("[Summary of previous conversation") else message.content


def fallback_summary(messages: Sequence[Message]) -> str:
    """A bounded, deterministic rolling digest of ``messages``: counts by role, the tools
    called, the first user message and one line per summarised span (the oldest lose their
    quotes first). An earlier digest in ``messages`` is extended, not quoted."""
    digest = _Digest()
    span: list[Message] = []
    for message in messages:
        if is_summary(message):
            digest.add_span(span)
            span = []
            digest.absorb(message)
        else:
            span.append(message)
    digest.add_span(span)
    return digest.render()


_NOT_QUOTED = "not quoted (dropped to keep this summary short)."
_COUNTS_LINE = re.compile(
    r"Messages summarised: (\d+) \(user (\d+), assistant (\d+), tool results (\d+), "
    r"system notes (\d+)(?:, in an earlier summary (\d+))?\)\."
)
_TOOLS_LINE = re.compile(r"Tools called: (.+)\.")
_TOOL_ITEM = re.compile(r"([\w.-]+) \((\d+)\)")
_OTHER_TOOLS_ITEM = re.compile(r"other tools \((\d+) calls?\)")
_FIRST_REQUEST_LABEL = "First user message of the conversation: "
_SPAN_LINE = re.compile(r"Messages? (\d+)(?:-(\d+))?: (.+)")
_ROLES_COUNTED = (Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM)


@dataclass
class _Span:
    """Messages ``first`` to ``last`` (1-based) and their quotes (None: dropped)."""

    first: int
    last: int
    text: str | None

    def line(self) -> str:
        where = f"Messages {self.first}-{self.last}"
        if self.first == self.last:
            where = f"Message {self.first}"
        return f"{where}: {_NOT_QUOTED if self.text is None else self.text}"


@dataclass
class _Digest:
    """The state of a fallback summary: totals, the first request and the spans."""

    count: int = 0
    roles: Counter[Role] = field(default_factory=Counter)
    unitemised: int = 0  # messages of an earlier summary that cannot be read back
    tools: Counter[str] = field(default_factory=Counter)
    other_tool_calls: int = 0  # calls of tools no longer listed by name
    first_request: str | None = None  # its line
    spans: list[_Span] = field(default_factory=list)

    def first_request_open(self) -> bool:
        """Whether the next user message would be the conversation's first one."""
        return self.first_request is None and not self.roles[Role.USER] and not self.unitemised

    def add_span(self, messages: list[Message]) -> None:
        """Count ``messages`` (no summary among them) and quote them as one span."""
        if not messages:
            return
        first = self.count + 1
        last_user = last_assistant = last_result = first_request = None
        tools: Counter[str] = Counter()
        for message in messages:
            if message.role == Role.USER:
                if self.first_request_open():
                    first_request = message
                    quote = one_line(message.content, _REQUEST_CHARS)
                    self.first_request = f'{_FIRST_REQUEST_LABEL}"{quote}"'
                last_user = message
            elif message.role == Role.ASSISTANT:
                tools.update(call.name for call in message.tool_calls)
                if message.content.strip():
                    last_assistant = message
            elif message.role == Role.TOOL and message.content.strip():
                last_result = message
            self.roles[message.role] += 1
        self.count += len(messages)
        for name, calls in tools.items():
            # Word characters, dots and dashes only, so that the list reads back.
            self.tools[re.sub(r"[^\w.-]", "_", name)[:_TOOL_NAME_CHARS] or "_"] += calls
        quotes = []
        if last_user is not None and last_user is first_request:
            quotes.append("the first user message (quoted above)")
        elif last_user is not None:
            quotes.append(f'last user message "{one_line(last_user.content, _QUOTE_CHARS)}"')
        if last_assistant is not None:
            text = one_line(last_assistant.content, _QUOTE_CHARS)
            quotes.append(f'last assistant message "{text}"')
        if not quotes and last_result is not None:
            quotes.append(f'last tool result "{one_line(last_result.content, _QUOTE_CHARS)}"')
        self.spans.append(
            _Span(first, self.count, "; ".join(quotes) + "." if quotes else "no text to quote.")
        )

    def absorb(self, summary: Message) -> None:
        """Fold in an earlier summary: read back if the fallback wrote it, else quoted."""
        text, covered = summary_text(summary), covered_count(summary)
        earlier = _parse(text, covered)
        if earlier is None:
            quote = one_line(text, _EARLIER_SUMMARY_CHARS)
            self.spans.append(
                _Span(self.count + 1, self.count + covered, f'earlier summary "{quote}".')
            )
            self.count += covered
            self.unitemised += covered
            return
        if self.first_request_open():
            self.first_request = earlier.first_request
        self.spans.extend(
            _Span(span.first + self.count, span.last + self.count, span.text)
            for span in earlier.spans
        )
        self.count += earlier.count
        self.roles.update(earlier.roles)
        self.unitemised += earlier.unitemised
        self.tools.update(earlier.tools)
        self.other_tool_calls += earlier.other_tool_calls

    def render(self) -> str:
        counts = ", ".join(
            f"{label} {self.roles[role]}"
            for label, role in zip(
                ("user", "assistant", "tool results", "system notes"), _ROLES_COUNTED, strict=True
            )
        )
        if self.unitemised:
            counts += f", in an earlier summary {self.unitemised}"
        lines = [f"Messages summarised: {self.count} ({counts})."]
        if self.tools or self.other_tool_calls:
            listed = self.tools.most_common(_TOOLS_LISTED)
            other = self.other_tool_calls + self.tools.total() - sum(n for _, n in listed)
            items = [f"{name} ({calls})" for name, calls in listed]
            if other:
                items.append(f"other tools ({other} call{'s' if other != 1 else ''})")
            lines.append(f"Tools called: {', '.join(items)}.")
        if self.first_request is not None:
            lines.append(self.first_request)
        lines.extend(self._span_lines())
        return "\n".join(lines)

    def _span_lines(self) -> list[str]:
        spans = [_Span(s.first, s.last, s.text) for s in self.spans]
        quoted = [s for s in spans if s.text is not None]
        size = sum(len(s.line()) + 1 for s in quoted)
        for span in quoted[:-1]:
            if size <= _SPANS_CHARS:
                break
            size -= len(span.line()) + 1
            span.text = None
        merged: list[_Span] = []
        for span in spans:
            if span.text is None and merged and merged[-1].text is None:
                merged[-1].last = span.last
            else:
                merged.append(span)
        return [span.line() for span in merged]


def _parse(text: str, covered: int) -> _Digest | None:
    """The digest a fallback summary was rendered from, or None for any other text."""
    lines = text.split("\n")
    counts = _COUNTS_LINE.fullmatch(lines[0])
    if counts is None:
        return None
    total, *by_role = (int(n) for n in counts.group(1, 2, 3, 4, 5))
    digest = _Digest(count=total, unitemised=int(counts.group(6) or 0))
    digest.roles.update(dict(zip(_ROLES_COUNTED, by_role, strict=True)))
    if total != covered or total != digest.roles.total() + digest.unitemised:
        return None
    position = 1
    tools = _TOOLS_LINE.fullmatch(lines[position]) if len(lines) > position else None
    if tools is not None:
        position += 1
        for item in tools.group(1).split(", "):
            if listed := _TOOL_ITEM.fullmatch(item):
                digest.tools[listed.group(1)] += int(listed.group(2))
            elif other := _OTHER_TOOLS_ITEM.fullmatch(item):
                digest.other_tool_calls += int(other.group(1))
            else:
                return None
    if len(lines) > position and lines[position].startswith(_FIRST_REQUEST_LABEL):
        digest.first_request = lines[position]
        position += 1
    for line in lines[position:]:
        span = _SPAN_LINE.fullmatch(line)
        if span is None:
            return None
        first = int(span.group(1))
        last = int(span.group(2) or first)
        if first != (digest.spans[-1].last + 1 if digest.spans else 1) or last < first:
            return None
        body = span.group(3)
        digest.spans.append(_Span(first, last, None if body == _NOT_QUOTED else body))
    if (digest.spans[-1].last if digest.spans else 0) != total:
        return None
    return digest
