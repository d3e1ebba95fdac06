"""tulip_memory.llm imports and works in a process with no Django settings at all."""

import textwrap

from tests.processes import run_python

SCRIPT = textwrap.dedent(
    """
    import os
    assert "DJANGO_SETTINGS_MODULE" not in os.environ
    from tulip_memory.llm import ChatClient, LLMConfig, LLMExtractor, LLMSummarizer, Redactor

    assert LLMConfig.from_settings().model is None
    client = ChatClient(LLMConfig.from_dict({"BASE_URL": "http://localhost:1/v1", "MODEL": "m"}))
    LLMExtractor(client)
    LLMSummarizer(client)
    assert Redactor().redact("password: s3cr3t!").kinds == ["password"]
    print("pure ok")
    """
)


def test_llm_package_works_without_django_settings():
    result = run_python(SCRIPT, django_settings=False)
    assert result.returncode == 0, result.stderr
    assert "pure ok" in result.stdout
