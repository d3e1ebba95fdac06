"""Labelled corpus of the secret redaction: secrets that must go, look-alikes that must pass.

``SECRETS``: ``(text, secret, kind)`` — after redaction ``secret`` no longer occurs in the
text and ``kind`` is among the findings. ``LOOK_ALIKES``: texts that must come back
unchanged. ``KEY_SESSION``: a conversation in which tools read and write a private key
far longer than a transcript's cut of a tool call; ``key_material_in`` tells whether any
of that key reached a text. The keys below are well-known documentation examples or
random strings, not live credentials.
"""

from __future__ import annotations

import base64
import hashlib

from tulip_memory.messages import Message, Role, ToolCall

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "-----END RSA PRIVATE KEY-----"
)

SECRETS: list[tuple[str, str, str]] = [
    (
        "my key is sk-proj-Xa81bC92dE03fG14hI25jK36lM47nO58",
        "sk-proj-Xa81bC92dE03fG14hI25jK36lM47nO58",
        "api_key",
    ),
    (
        "use sk-1234567890abcdefghij1234567890abcdefghijKLMN",
        "sk-1234567890abcdefghij1234567890abcdefghijKLMN",
        "api_key",
    ),
    (
        "anthropic: sk-ant-api03-AbCdEf0123456789GhIjKl0123456789MnOp",
        "sk-ant-api03-AbCdEf0123456789GhIjKl0123456789MnOp",
        "api_key",
    ),
    (
        "token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 for CI",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "api_key",
    ),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF works",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
        "api_key",
    ),
    ("AWS access key AKIAIOSFODNN7EXAMPLE in us-east-1", "AKIAIOSFODNN7EXAMPLE", "api_key"),
    (
        "slack bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "api_key",
    ),
    (
        "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc please",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "api_key",
    ),
    (
        "maps key AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "api_key",
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt",
    ),
    (
        "Authorization: Bearer 7f3a9c2e1b8d4f6a0c5e9b2d7a1f3c8e",
        "7f3a9c2e1b8d4f6a0c5e9b2d7a1f3c8e",
        "bearer",
    ),
    ("the db is postgres://app:Sup3rS3cret@db.internal:5432/app", "Sup3rS3cret", "url_credentials"),
    ("redis://default:r3d1sPa55w0rd@cache:6379/0 is the cache", "r3d1sPa55w0rd", "url_credentials"),
    (
        "api_key=9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "secret_assignment",
    ),
    ("the client secret is Zx81kLm2Qp93Rt47Vw56", "Zx81kLm2Qp93Rt47Vw56", "secret_assignment"),
    ("ACCESS_TOKEN: 'a1B2c3D4e5F6g7H8i9J0k1L2'", "a1B2c3D4e5F6g7H8i9J0k1L2", "secret_assignment"),
    ("my password is hunter2", "hunter2", "password"),
    ("Password: Tr0ub4dor&3", "Tr0ub4dor&3", "password"),
    ("I changed my pwd to S3cure!Pass yesterday", "S3cure!Pass", "password"),
    ("the wifi passphrase is correcthorsebatterystaple.", "correcthorsebatterystaple", "password"),
    ("My PIN is 4821.", "4821", "password"),
    ("the admin password was 'letmein' until today", "letmein", "password"),
    ("card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111", "card_number"),
    ("pay with 5555555555554444", "5555555555554444", "card_number"),
    ("amex 3782-822463-10005 on file", "3782-822463-10005", "card_number"),
    ("discover 6011 1111 1111 1117.", "6011 1111 1111 1117", "card_number"),
    (f"here is the deploy key:\n{PEM}\nthanks", "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn", "private_key"),
]

LOOK_ALIKES: list[str] = [
    "I use sk-learn for modelling",
    "we moved from scikit-learn to sk-learn-extra last year",
    "the token budget is 6000 tokens",
    "I forgot my password again",
    "The password is required for login",
    "my password is too short, the form says",
    "Click the password reset link in the email",
    "Bearer of bad news: the release slips",
    "my order number is 4111 1111 1111 1112",
    "ISBN 978-0-306-40615-7",
    "call me at +1 415 555 2671",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
    "see https://example.com/docs/api-keys for the key format",
    "connect to postgres://localhost:5432/app",
    "ticket PROJ-1234 tracks it",
    "the key is to be consistent",
    "secret: keep it simple",
    "The secret to good bread is time",
    "we use JWTs for auth",
    "AKIA is the prefix of AWS access keys",
    "The API key goes in the X-Api-Key header",
    "version 3.12.1 was released on 2024-10-07",
    "tracking number 1Z999AA10123456784",
    "pin the tab to keep it open",
    "timestamp 1700000000000 in milliseconds",
    "I live at 221B Baker Street",
    "the token is valid for one hour",
]


# 20 lines of 64 random-looking base64 characters between PEM markers: 1,300+ characters.
LONG_PEM_LINES = [
    base64.b64encode(hashlib.sha384(f"not a key {i}".encode()).digest()).decode() for i in range(20)
]
LONG_PEM = (
    "-----BEGIN PRIVATE KEY-----\n" + "\n".join(LONG_PEM_LINES) + "\n-----END PRIVATE KEY-----"
)

KEY_SESSION = [
    Message(Role.USER, "Please load my deploy key and copy it to the server."),
    Message(Role.ASSISTANT, "", tool_calls=[ToolCall("c1", "read_file", {"path": "id_rsa"})]),
    Message(Role.TOOL, LONG_PEM, tool_call_id="c1"),
    Message(
        Role.ASSISTANT,
        "",
        tool_calls=[ToolCall("c2", "write_file", {"path": "/srv/id_rsa", "content": LONG_PEM})],
    ),
    Message(Role.TOOL, "written", tool_call_id="c2"),
    Message(Role.ASSISTANT, "Done: the key is on the server."),
]


def key_material_in(text: str) -> list[str]:
    """The 12-character pieces of ``LONG_PEM``'s lines that occur in ``text``."""
    return [
        line[start : start + 12]
        for line in LONG_PEM_LINES
        for start in range(len(line) - 11)
        if line[start : start + 12] in text
    ]
