"""tulip_memory.llm (and the manager's LLM extractor on it) imports and works in a process
with no Django settings at all."""

import textwrap

from tests.processes import run_python

SCRIPT = textwrap.dedent(
    """
    import os
    assert "DJANGO_SETTINGS_MODULE" not in os.environ
    from tulip_memory.llm import ChatClient, LLMConfig, LLMSummarizer, Redactor
    from tulip_memory.manager import LLMExtractor, LLMMemoryManager
    from tulip_memory.store import InMemoryStore

    assert LLMConfig.from_settings().model is None
    client = ChatClient(LLMConfig.from_dict({"BASE_URL": "http://localhost:1/v1", "MODEL": "m"}))
    extractor = LLMExtractor(client)
    assert LLMMemoryManager(InMemoryStore(), extractor=extractor).extractor is extractor
    assert LLMMemoryManager(InMemoryStore()).extractor is None  # no model configured: heuristic
    LLMSummarizer(client)
    assert Redactor().redact("password: s3cr3t!").kinds == ["password"]
    print("pure ok")
    """
)


def test_llm_package_works_without_django_settings():
    result = run_python(SCRIPT, django_settings=False)
    assert result.returncode == 0, result.stderr
    assert "pure ok" in result.stdout
