"""Secret redaction on its labelled corpus (tests/llm/redaction_corpus.py) and its policy."""

from __future__ import annotations

import pytest

from tests.llm.redaction_corpus import LOOK_ALIKES, SECRETS
from tulip_memory.llm.redaction import DETECTORS, RedactionPolicy, Redactor

REDACTOR = Redactor()


def test_the_corpus_is_large_enough():
    assert len(SECRETS) + len(LOOK_ALIKES) >= 40
    assert {kind for _, _, kind in SECRETS} == set(DETECTORS)


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS, ids=[s[2] for s in SECRETS])
def test_secrets_are_redacted(text, secret, kind):
    result = REDACTOR.redact(text)
    assert secret not in result.text
    assert kind in result.kinds
    assert f"[REDACTED:{kind}]" in result.text


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_pass(text):
    result = REDACTOR.redact(text)
    assert result.text == text and result.kinds == []


def test_text_around_a_secret_is_kept():
    result = REDACTOR.redact("my password is hunter2, and I live in Oslo.")
    assert result.text == "my password is [REDACTED:password], and I live in Oslo."


def test_values_are_redacted_recursively():
    value = {"args": ["api_key=9f8e7d6c5b4a39281706f5e4d3c2b1a0", 3], "n": None}
    redacted, kinds = REDACTOR.redact_value(value)
    assert redacted == {"args": ["api_key=[REDACTED:secret_assignment]", 3], "n": None}
    assert kinds == ["secret_assignment"]
    assert value["args"][0].startswith("api_key=9f8e")  # the input is not modified


def test_policy_detectors_extra_patterns_allow_and_replacement():
    redactor = Redactor(
        RedactionPolicy(
            detectors=("card_number",),
            extra_patterns={"employee_id": r"\bEMP-(\d{6})\b"},
            allow=[r"5555555555554444"],
            replacement="<{kind}>",
        )
    )
    text = "my password is hunter2, card 4111111111111111, test card 5555555555554444, EMP-123456"
    assert redactor.redact(text).text == (
        "my password is hunter2, card <card_number>, test card 5555555555554444, EMP-<employee_id>"
    )


def test_bad_text():
    with pytest.raises(ValueError, match="text must be a str, got bytes"):
        REDACTOR.redact(b"password: x")  # type: ignore[arg-type]


def test_policy_from_settings_options():
    policy = RedactionPolicy.from_options({"DETECTORS": ["password"], "REPLACEMENT": "***"})
    assert Redactor(policy).redact("password: abc123xyz and AKIAIOSFODNN7EXAMPLE").text == (
        "password: *** and AKIAIOSFODNN7EXAMPLE"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"DETECTOR": []}, r"unknown keys \['DETECTOR'\]"),
        ({"DETECTORS": ["passwords"]}, r"detectors has unknown names \['passwords'\]"),
        ({"EXTRA_PATTERNS": {"x": "("}}, r"extra_patterns\['x'\] is not a valid regex"),
        ({"ALLOW": [3]}, r"allow\[\] must be a regex string"),
        ({"REPLACEMENT": 1}, "replacement must be a str"),
    ],
)
def test_bad_policy_options(options, message):
    with pytest.raises(ValueError, match=message):
        RedactionPolicy.from_options(options)


def test_stub_in_finds_what_the_policy_puts_in_place_of_a_secret():
    assert REDACTOR.stub_in("The user's password is [REDACTED:password].") == (
        "[REDACTED:password]"
    )
    assert REDACTOR.stub_in("the run's own [REDACTED:secret] too") == "[REDACTED:secret]"
    assert REDACTOR.stub_in("no stub, [REDACTED] alone or [REDACTED:unknown]") is None
    custom = Redactor(RedactionPolicy(detectors=("password",), replacement="<{kind}>"))
    assert custom.stub_in("is <password>") == "<password>" and custom.stub_in("<b>") is None
    assert Redactor(RedactionPolicy(replacement="")).stub_in("anything") is None
