"""A chat model behind tulip_memory: a client for any OpenAI-compatible server, structured
output, secret redaction and a conversation summariser (docs/llm.md).

This layer sits below the manager and knows nothing of memories; every failure of the
model raises :class:`~tulip_memory.exceptions.LLMError`. Importable without Django settings.
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
