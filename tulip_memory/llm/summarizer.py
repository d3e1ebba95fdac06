"""An LLM ``summarize_fn`` for :class:`~tulip_memory.conversation.SummarizingManager`.

Incremental: the previous summary and the messages that newly crossed the cut are sent,
redacted and cut to the token budget. Failures raise :class:`~tulip_memory.exceptions.LLMError`.
"""

from __future__ import annotations

import logging

from tulip_memory.conversation.summary import is_summary, summary_text
from tulip_memory.core.numbers import check_int
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.budget import cut_to_budget
from tulip_memory.llm.client import ChatClient
from tulip_memory.llm.redaction import RedactionPolicy, Redactor
from tulip_memory.llm.transcript import redacted_lines
from tulip_memory.llm.usage import Usage
from tulip_memory.messages import Message

__all__ = ["SUMMARY_PROMPT", "LLMSummarizer"]

logger = logging.getLogger("tulip_memory.llm")

SUMMARY_PROMPT = """You maintain the running summary of a conversation between a user and an \
assistant, so the assistant can continue it without the old messages. You get the summary \
so far (possibly empty) and the messages that followed it. Write the updated summary: what \
the user wants, decisions and facts established, tool results that matter, open questions \
and next steps. Keep what still matters from the summary so far; drop what was resolved. \
Plain prose or short bullet points, no preamble, at most {words} words."""


class LLMSummarizer:
    """``async (messages) -> str`` summariser over a :class:`ChatClient`.

    Args:
        client: the chat client; ``None`` builds one from ``TULIP_MEMORY["LLM"]``.
        max_tokens: bound of a summary (default ``SUMMARY_MAX_TOKENS``).
        tool_chars: characters of a tool call's arguments or result kept in the prompt.
        redactor: the secret redaction; ``None`` uses the config's ``REDACTION`` policy.
    """

    def __init__(
        self,
        client: ChatClient | None = None,
        *,
        max_tokens: int | None = None,
        tool_chars: int = 200,
        redactor: Redactor | None = None,
    ) -> None:
        if client is not None and not isinstance(client, ChatClient):
            raise ValueError(f"client must be a ChatClient or None, got {type(client).__name__}")
        for name, value in (("max_tokens", max_tokens), ("tool_chars", tool_chars)):
            if value is not None:
                check_int(value, name)
        if redactor is not None and not isinstance(redactor, Redactor):
            raise ValueError(f"redactor must be a Redactor or None, got {type(redactor).__name__}")
        self.client = client or ChatClient()
        self.max_tokens = max_tokens or self.client.config.summary_max_tokens
        self.tool_chars = tool_chars
        self.redactor = redactor or Redactor(
            RedactionPolicy.from_options(self.client.config.redaction)
        )
        #: Usage of the calls made so far (summed; the manager's contract returns text only).
        self.usage = Usage()

    def __repr__(self) -> str:
        return f"LLMSummarizer({self.client!r}, max_tokens={self.max_tokens})"

    async def __call__(self, messages: list[Message]) -> str:
        """The summary of ``messages`` (an earlier summary first, if any, then new messages)."""
        previous = ""
        if messages and is_summary(messages[0]):
            previous, messages = summary_text(messages[0]), messages[1:]
        previous = self.redactor.redact(previous).text
        lines = [
            line.text
            for line in redacted_lines(messages, self.redactor, tool_chars=self.tool_chars)
        ]
        estimator = self.client.estimator
        fixed = estimator.tokens(SUMMARY_PROMPT) + estimator.tokens(previous) + self.max_tokens
        cut = cut_to_budget(
            lines,
            max(1, self.client.config.input_token_budget - fixed),
            estimator,
            what="messages to summarise",
        )
        prompt = f"Summary so far:\n{previous or '(none)'}\n\nNew messages:\n" + "\n".join(cut.kept)
        system = SUMMARY_PROMPT.format(words=self.max_tokens * 3 // 4)
        try:
            result = await self.client.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                max_tokens=self.max_tokens,
                purpose="summary",
            )
        except LLMError as error:
            self.usage += Usage.of(error)  # the requests that got no answer
            raise
        self.usage += result.usage
        text = (result.content or "").strip()
        if not text:
            raise LLMError("summary: the model returned no text", kind="malformed_output")
        return _bounded(text, int(self.max_tokens * estimator.chars_per_token))


def _bounded(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, at the last sentence end when there is one."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(". "), head.rfind(".\n"), head.rfind("\n"))
    return head[: end + 1].rstrip() if end > limit // 2 else head.rstrip() + "…"
