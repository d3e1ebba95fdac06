"""A real chat model behind tulip_memory: one client, structured output, redaction and a
conversation summariser.

* :class:`ChatClient` — OpenAI chat-completions protocol (``openai`` library, the ``llm``
  extra) to any compatible server, configured by ``TULIP_MEMORY["LLM"]`` (:class:`LLMConfig`);
* :class:`StructuredOutput` — JSON-schema response format, else tool calling, else JSON in
  text with one repair;
* :class:`Redactor` / :class:`RedactionPolicy` — likely secrets taken out of text;
* :class:`LLMSummarizer` — an incremental ``summarize_fn`` for ``SummarizingManager``.

Fact extraction with consolidation on this client is the manager's
(:class:`tulip_memory.manager.LLMExtractor`): this layer sits below the manager and knows
nothing of memories. Every failure of the model raises
:class:`~tulip_memory.exceptions.LLMError`. Pure Python: importable without Django
settings (the defaults apply). See docs/llm.md.
"""

from tulip_memory.exceptions import LLMError
from tulip_memory.llm.client import ChatClient, ChatResult
from tulip_memory.llm.config import LLMConfig
from tulip_memory.llm.redaction import RedactionPolicy, Redactor
from tulip_memory.llm.structured import StructuredOutput
from tulip_memory.llm.summarizer import LLMSummarizer
from tulip_memory.llm.usage import Usage

__all__ = [
    "ChatClient",
    "ChatResult",
    "LLMConfig",
    "LLMError",
    "LLMSummarizer",
    "RedactionPolicy",
    "Redactor",
    "StructuredOutput",
    "Usage",
]
