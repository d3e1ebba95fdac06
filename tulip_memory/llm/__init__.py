"""A chat model behind tulip_memory: a client for any OpenAI-compatible server, structured
output, secret redaction and a conversation summariser (docs/llm.md); below the manager,
it knows nothing of memories. Every failure raises :class:`~tulip_memory.exceptions.LLMError`.
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
