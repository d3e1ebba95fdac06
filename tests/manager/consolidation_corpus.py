"""Labelled corpus of LLM extraction runs: given the scope's memories, a conversation and
the model's scripted answers, the store must end in exactly ``expected``.

``facts`` is the scripted extraction answer (``(type, key, content)`` per fact) and
``decisions`` the scripted consolidation answer (``(fact, event[, type, key, content])``,
``fact`` indexing the candidates kept after refusals and de-duplication), or ``None`` when
the model must not be asked (no facts, or nothing related stored). ``operations`` are the
applied ``(event, type, key)``; ``versions`` the history length of some memories after the
run (``valid_to`` set on all but the current one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]


@dataclass(frozen=True)
class Case:
    name: str
    existing: dict[Key, str]
    turns: tuple[str, ...]
    facts: list[tuple[Any, ...]]
    decisions: list[tuple[Any, ...]] | None
    expected: dict[Key, str]
    operations: list[tuple[str, str, str]]
    versions: dict[Key, int] = field(default_factory=dict)


ROLE = ("user", "role")
CITY = ("user", "location")
LANG = ("user", "preferred_language")
DB = ("project", "database")
DEADLINE = ("project", "deadline")
STYLE = ("feedback", "code_style")
TESTS = ("feedback", "tests")
DOCS = ("reference", "design_doc")

CASES: list[Case] = [
    Case(
        "first fact",
        {},
        ("I'm a backend engineer.", "Nice!"),
        [("user", "role", "The user is a backend engineer.")],
        None,
        {ROLE: "The user is a backend engineer."},
        [("ADD", "user", "role")],
    ),
    Case(
        "several facts of every type",
        {},
        ("I'm in Lisbon, we use Postgres, keep answers short, spec is at https://x.io/spec",),
        [
            ("user", "location", "The user lives in Lisbon."),
            ("project", "database", "The project uses PostgreSQL."),
            ("feedback", "answer_length", "The user wants short answers."),
            ("reference", "spec", "The spec is at https://x.io/spec."),
        ],
        None,
        {
            CITY: "The user lives in Lisbon.",
            DB: "The project uses PostgreSQL.",
            ("feedback", "answer_length"): "The user wants short answers.",
            ("reference", "spec"): "The spec is at https://x.io/spec.",
        },
        [
            ("ADD", "user", "location"),
            ("ADD", "project", "database"),
            ("ADD", "feedback", "answer_length"),
            ("ADD", "reference", "spec"),
        ],
    ),
    Case("small talk", {}, ("hi", "hello!", "thanks, bye"), [], None, {}, []),
    Case(
        "small talk keeps what is stored",
        {ROLE: "The user is a nurse."},
        ("How are you?", "Fine."),
        [],
        None,
        {ROLE: "The user is a nurse."},
        [],
    ),
    Case(
        "a question is not a fact",
        {},
        ("Should we use Redis?", "Maybe."),
        [],
        None,
        {},
        [],
    ),
    Case(
        "role update",
        {ROLE: "The user is a nurse."},
        ("I'm a surgeon now.",),
        [("user", "role", "The user is a surgeon.")],
        [(0, "UPDATE", "user", "role", "The user is a surgeon (formerly a nurse).")],
        {ROLE: "The user is a surgeon (formerly a nurse)."},
        [("UPDATE", "user", "role")],
        {ROLE: 2},
    ),
    Case(
        "moved city",
        {CITY: "The user lives in Berlin."},
        ("I moved to Oslo last month.",),
        [("user", "location", "The user lives in Oslo.")],
        [(0, "UPDATE", "user", "location", "The user lives in Oslo.")],
        {CITY: "The user lives in Oslo."},
        [("UPDATE", "user", "location")],
        {CITY: 2},
    ),
    Case(
        "restated fact",
        {LANG: "The user prefers Python."},
        ("As I said, Python please.",),
        [("user", "preferred_language", "The user prefers Python.")],
        [(0, "NONE")],
        {LANG: "The user prefers Python."},
        [],
        {LANG: 1},
    ),
    Case(
        "paraphrase is NONE",
        {STYLE: "The user wants type hints everywhere."},
        ("Always add type hints.",),
        [("feedback", "type_hints", "The user wants type hints in all code.")],
        [(0, "NONE")],
        {STYLE: "The user wants type hints everywhere."},
        [],
    ),
    Case(
        "refinement merges",
        {DB: "The project uses PostgreSQL."},
        ("It's PostgreSQL 16 with pgvector.",),
        [("project", "database_version", "The project uses PostgreSQL 16 with pgvector.")],
        [(0, "UPDATE", "project", "database", "The project uses PostgreSQL 16 with pgvector.")],
        {DB: "The project uses PostgreSQL 16 with pgvector."},
        [("UPDATE", "project", "database")],
        {DB: 2},
    ),
    Case(
        "contradiction deletes",
        {("user", "pets"): "The user has a dog."},
        ("My dog passed away; no pets now.",),
        [("user", "no_pets", "The user has no pets.")],
        [(0, "ADD"), (0, "DELETE", "user", "pets", None)],
        {("user", "no_pets"): "The user has no pets."},
        [("ADD", "user", "no_pets"), ("DELETE", "user", "pets")],
        {("user", "pets"): 1},
    ),
    Case(
        "contradiction without replacement",
        {DEADLINE: "The deadline is March 1."},
        ("There's no deadline anymore, it was cancelled.",),
        [("project", "deadline_cancelled", "The project has no deadline.")],
        [(0, "DELETE", "project", "deadline", None)],
        {},
        [("DELETE", "project", "deadline")],
        {DEADLINE: 1},
    ),
    Case(
        "deadline moved",
        {DEADLINE: "The deadline is March 1."},
        ("Deadline moved to April 15.",),
        [("project", "deadline", "The deadline is April 15.")],
        [(0, "UPDATE", "project", "deadline", "The deadline is April 15.")],
        {DEADLINE: "The deadline is April 15."},
        [("UPDATE", "project", "deadline")],
        {DEADLINE: 2},
    ),
    Case(
        "new fact beside an unrelated one",
        {ROLE: "The user is a teacher."},
        ("I live in Rome.",),
        [("user", "location", "The user lives in Rome.")],
        [(0, "ADD")],
        {ROLE: "The user is a teacher.", CITY: "The user lives in Rome."},
        [("ADD", "user", "location")],
    ),
    Case(
        "duplicates within the run: the last wins",
        {},
        ("I use vim. Actually, I switched to helix.",),
        [
            ("user", "editor", "The user uses vim."),
            ("user", "editor", "The user uses helix."),
        ],
        None,
        {("user", "editor"): "The user uses helix."},
        [("ADD", "user", "editor")],
    ),
    Case(
        "duplicate decisions: the last wins",
        {ROLE: "The user is a student."},
        ("I graduated, I'm a junior developer.",),
        [("user", "role", "The user is a junior developer.")],
        [
            (0, "UPDATE", "user", "role", "The user is a developer."),
            (0, "UPDATE", "user", "role", "The user is a junior developer."),
        ],
        {ROLE: "The user is a junior developer."},
        [("UPDATE", "user", "role")],
        {ROLE: 2},
    ),
    Case(
        "unknown type refused",
        {},
        ("I play chess and I'm a pilot.",),
        [("hobby", "chess", "The user plays chess."), ("user", "role", "The user is a pilot.")],
        None,
        {ROLE: "The user is a pilot."},
        [("ADD", "user", "role")],
    ),
    Case(
        "invalid key refused",
        {},
        ("I'm Ana.",),
        [("user", "   ", "The user is Ana."), ("user", "name", "The user's name is Ana.")],
        None,
        {("user", "name"): "The user's name is Ana."},
        [("ADD", "user", "name")],
    ),
    Case(
        "low confidence dropped",
        {},
        ("Maybe I'll learn Rust someday.",),
        [("user", "learning", "The user might learn Rust.", 0.3)],
        None,
        {},
        [],
    ),
    Case(
        "update of a memory not shown is refused",
        {ROLE: "The user is a chef."},
        ("I'm a chef in Paris.",),
        [("user", "location", "The user lives in Paris.")],
        [(0, "UPDATE", "user", "name", "The user is Paul.")],
        {ROLE: "The user is a chef."},
        [],
    ),
    Case(
        "unknown event refused",
        {ROLE: "The user is a chef."},
        ("I'm a head chef now.",),
        [("user", "role", "The user is a head chef.")],
        [(0, "REPLACE", "user", "role", "The user is a head chef.")],
        {ROLE: "The user is a chef."},
        [],
    ),
    Case(
        "update with empty content keeps the candidate's",
        {ROLE: "The user is a chef."},
        ("I'm a head chef now.",),
        [("user", "role", "The user is a head chef.")],
        [(0, "UPDATE", "user", "role", "")],
        {ROLE: "The user is a head chef."},
        [("UPDATE", "user", "role")],
        {ROLE: 2},
    ),
    Case(
        "feedback correction",
        {TESTS: "The user wants unittest-style tests."},
        ("No, use pytest, not unittest.",),
        [("feedback", "tests", "The user wants pytest-style tests.")],
        [(0, "UPDATE", "feedback", "tests", "The user wants pytest-style tests, not unittest.")],
        {TESTS: "The user wants pytest-style tests, not unittest."},
        [("UPDATE", "feedback", "tests")],
        {TESTS: 2},
    ),
    Case(
        "reference added next to feedback",
        {STYLE: "The user wants black formatting."},
        ("The design doc is docs/design.md.",),
        [("reference", "design_doc", "The design doc is docs/design.md.")],
        # No decision call: the two share no term once stop words are dropped ("The"
        # alone made the feedback a candidate before ranking used BM25 over terms).
        None,
        {STYLE: "The user wants black formatting.", DOCS: "The design doc is docs/design.md."},
        [("ADD", "reference", "design_doc")],
    ),
    Case(
        "reference moved",
        {DOCS: "The design doc is docs/design.md."},
        ("We moved the design doc to the wiki: https://wiki.x/design",),
        [("reference", "design_doc", "The design doc is at https://wiki.x/design.")],
        [(0, "UPDATE", "reference", "design_doc", "The design doc is at https://wiki.x/design.")],
        {DOCS: "The design doc is at https://wiki.x/design."},
        [("UPDATE", "reference", "design_doc")],
        {DOCS: 2},
    ),
    Case(
        "mixed decisions in one run",
        {
            ROLE: "The user is an analyst.",
            CITY: "The user lives in Madrid.",
            LANG: "The user prefers R.",
        },
        ("I'm a data scientist now, still in Madrid, and I use Python instead of R.",),
        [
            ("user", "role", "The user is a data scientist."),
            ("user", "location", "The user lives in Madrid."),
            ("user", "preferred_language", "The user prefers Python."),
            ("project", "framework", "The project uses pandas."),
        ],
        [
            (0, "UPDATE", "user", "role", "The user is a data scientist."),
            (1, "NONE"),
            (2, "UPDATE", "user", "preferred_language", "The user prefers Python over R."),
            (3, "ADD"),
        ],
        {
            ROLE: "The user is a data scientist.",
            CITY: "The user lives in Madrid.",
            LANG: "The user prefers Python over R.",
            ("project", "framework"): "The project uses pandas.",
        },
        [
            ("UPDATE", "user", "role"),
            ("UPDATE", "user", "preferred_language"),
            ("ADD", "project", "framework"),
        ],
        {ROLE: 2, CITY: 1, LANG: 2},
    ),
    Case(
        "missing decision does nothing for that fact",
        {ROLE: "The user is a pilot."},
        ("I fly for Iberia and live in Seville.",),
        [
            ("user", "employer", "The user works for Iberia."),
            ("user", "location", "The user lives in Seville."),
        ],
        [(0, "ADD")],
        {ROLE: "The user is a pilot.", ("user", "employer"): "The user works for Iberia."},
        [("ADD", "user", "employer")],
    ),
    Case(
        "delete of one memory among several",
        {ROLE: "The user is a pilot.", ("user", "employer"): "The user works for Iberia."},
        ("I quit Iberia, I'm freelancing.",),
        [("user", "employment", "The user is a freelancer.")],
        [(0, "ADD"), (0, "DELETE", "user", "employer", None)],
        {ROLE: "The user is a pilot.", ("user", "employment"): "The user is a freelancer."},
        [("ADD", "user", "employment"), ("DELETE", "user", "employer")],
        {("user", "employer"): 1},
    ),
    Case(
        "secret in a fact is redacted before the write",
        {},
        ("Our staging DB is postgres://app:Sup3rS3cret@stage/app",),
        [("project", "staging_db", "Staging DB: postgres://app:Sup3rS3cret@stage/app")],
        None,
        {
            (
                "project",
                "staging_db",
            ): "Staging DB: postgres://app:[REDACTED:url_credentials]@stage/app"
        },
        [("ADD", "project", "staging_db")],
    ),
    Case(
        "a password is never a memory",
        {},
        ("my password is hunter2",),
        [("user", "password", "The user's password is hunter2.")],
        None,
        {("user", "password"): "The user's password is [REDACTED:password]."},
        [("ADD", "user", "password")],
    ),
    Case(
        "tool results in the run",
        {},
        ("What's the weather in Oslo? I live there.",),
        [("user", "location", "The user lives in Oslo.")],
        None,
        {CITY: "The user lives in Oslo."},
        [("ADD", "user", "location")],
    ),
    Case(
        "add when the own key exists becomes that key's new version",
        {("user", "editor"): "The user uses vim."},
        ("I use emacs now.",),
        [("user", "editor", "The user uses emacs.")],
        [(0, "ADD")],
        {("user", "editor"): "The user uses emacs."},
        [("ADD", "user", "editor")],
        {("user", "editor"): 2},
    ),
    Case(
        "update then delete across two facts",
        {ROLE: "The user is a manager.", ("project", "team_size"): "The team has 5 people."},
        ("I'm a director now; the team was dissolved.",),
        [
            ("user", "role", "The user is a director."),
            ("project", "team", "The team was dissolved."),
        ],
        [
            (0, "UPDATE", "user", "role", "The user is a director."),
            (1, "DELETE", "project", "team_size", None),
        ],
        {ROLE: "The user is a director."},
        [("UPDATE", "user", "role"), ("DELETE", "project", "team_size")],
        {ROLE: 2, ("project", "team_size"): 1},
    ),
]
