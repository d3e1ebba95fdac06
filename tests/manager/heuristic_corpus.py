"""A labelled corpus for the heuristic extractor: utterances and the facts they state.

Each entry is one user utterance (optionally after an assistant message, which is what
confirmations refer to) and the facts a careful reader would store, one memory type per
fact (a type twice when the utterance states two facts of it). Negatives (questions,
small talk, hypotheticals, negated roles, third parties, pronoun-only preferences)
expect nothing. The corpus is split in two: ``TUNING``, which the rules were tuned on,
and ``HELD_OUT``, written before the rules changed and never used to tune them, so its
figures say how the rules do on phrasings they were not fitted to. ``bench/manager.py
--corpus`` prints precision and recall per type over each; tests/manager/test_heuristic.py
holds the extractor to a floor on both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tulip_memory.manager import MemoryType
from tulip_memory.manager.heuristic import extract_heuristic
from tulip_memory.messages import Message, Role

U, F, P, R = MemoryType.USER, MemoryType.FEEDBACK, MemoryType.PROJECT, MemoryType.REFERENCE


@dataclass(frozen=True)
class Labelled:
    text: str
    expected: tuple[MemoryType, ...]  # one entry per fact stated
    assistant: str | None = None


def _l(text: str, *facts: MemoryType, assistant: str | None = None) -> Labelled:
    return Labelled(text, facts, assistant)


TUNING: list[Labelled] = [
    # --- user: roles, names, places, preferences ------------------------------------
    _l("I'm a data scientist at Acme.", U),
    _l("I am a senior backend engineer.", U),
    _l("As a nurse, I often work night shifts.", U),
    _l("My name is Ada Lovelace.", U),
    _l("Call me Grace.", U),
    _l("I work at Globex Corporation.", U),
    _l("I live in Lyon.", U),
    _l("My timezone is Europe/Paris.", U),
    _l("I prefer tabs over spaces.", U),
    _l("I really like short answers with code first.", U),
    _l("I hate long meetings.", U),
    _l("My favourite editor is Helix.", U),
    _l("I'd rather use PostgreSQL than MySQL.", U),
    # --- feedback: corrections and confirmations ------------------------------------
    _l("No, use pytest instead of unittest.", F),
    _l("Actually, the function should return None on a miss.", F),
    _l("Don't add comments to obvious code.", F),
    _l("Never push directly to the main branch.", F),
    _l("Always run the linter before committing.", F),
    _l("That's wrong: the timeout is in milliseconds.", F),
    _l("Stop summarising the diff at the end.", F),
    _l("Exactly, that's it.", F, assistant="I split the migration into two steps. Then I ran it."),
    _l("Perfect!", F, assistant="I used a single bulk insert instead of a loop."),
    _l("Yes, that's right.", F, assistant="The cache key includes the tenant id."),
    # --- project facts ----------------------------------------------------------------
    _l("We're migrating to Django 6 this quarter.", P),
    _l("The project uses Celery with Redis as the broker.", P),
    _l("Our stack is Django, PostgreSQL and HTMX.", P),
    _l("We decided to drop support for Python 3.10.", P),
    _l("The deadline is March 14.", P),
    _l("The backend is written in Go.", P),
    # --- references -------------------------------------------------------------------
    _l("The design doc is at https://docs.example.com/design/memory.", R),
    _l("See the onboarding guide for the setup steps.", R),
    _l("This is tracked in PROJ-1234.", R),
    _l("The steps are in docs/setup.md.", R),
    _l("Ticket #4521 has the full stack trace.", R),
    # --- several types at once ----------------------------------------------------------
    _l("We're building the billing service, spec at https://wiki.example.com/billing.", P, R),
    _l("I'm a product manager and I prefer bullet points.", U, U),
    # --- negatives ----------------------------------------------------------------------
    _l("Thanks!"),
    _l("Hello there."),
    _l("What's the weather like in Paris?"),
    _l("Can you explain how the cache works?"),
    _l("I'm a bit tired today."),
    _l("I like that."),
    _l("If I were a doctor I would know this."),
    _l("No worries."),
    _l("Don't worry about it."),
    _l("My friend is a teacher."),
    _l("ok"),
    _l("Is the deadline on Friday?"),
    _l("Sounds good, let's continue."),
    _l("Perfect!"),  # a confirmation of nothing: no assistant message before it
    _l("I'd like to see the logs."),
    _l("No."),
    # --- hard cases, labelled by what they state (the heuristic misses or misreads some) --
    _l("I've been writing Rust for five years.", U),
    _l("I don't like emojis in commit messages.", U),
    _l("Please keep answers under 100 words.", F),
    _l("You should use f-strings here.", F),
    _l("We ship a release every Tuesday.", P),
    _l("Our team is using Kubernetes on GKE.", P),
    _l("Actually I'm not sure yet."),
    _l("Never again will I order from there."),
    _l("We are using the meeting room at noon."),
    # --- user: greetings with names, several facts, negations --------------------------
    _l("Hi, I'm Ada.", U),
    _l("Hello, I'm Bruno and I'm a mobile developer.", U, U),
    _l("Hey there! I am Fatima.", U),
    _l("Hi, this is Jonas.", U),
    _l("My name's Ingrid.", U),
    _l("I'm Rahul, a DevOps engineer at Atlassian.", U, U),
    _l("I'm Sofia from the platform team.", U),
    _l("I'm a software architect for Siemens.", U),
    _l("I work for Deutsche Bahn.", U),
    _l("I'm located in Montreal, Canada.", U),
    _l("I'm based in Singapore and I prefer async communication.", U, U),
    _l("I prefer vegetarian food and my favourite editor is Vim.", U, U),
    _l("I like concise code reviews but I dislike nitpicks.", U, U),
    _l("I don't really like long explanations.", U),
    _l("I do not enjoy pair programming.", U),
    _l("I really enjoy writing tests.", U),
    _l("My favourite database is PostgreSQL.", U),
    _l("My preferred language is Python.", U),
    _l("My time zone is UTC+2.", U),
    _l("I'm in the Pacific time zone.", U),
    _l("I'm not a fan of mocks.", U),
    _l("I'm Omar, I work at Careem and I live in Dubai.", U, U, U),
    # --- feedback -----------------------------------------------------------------------
    _l("No, the timestamps must be in UTC.", F),
    _l("Wrong, the limit is per tenant.", F),
    _l("Please always add type hints.", F),
    _l("Don't use print for logging.", F),
    _l("Use logging instead of print.", F),
    _l("Avoid global state in the tests.", F),
    _l("Keep functions under 30 lines.", F),
    _l("Only use the standard library here.", F),
    _l("You must not commit secrets.", F),
    _l("That's incorrect, the API returns 404 there.", F),
    _l("Not quite, it should retry three times.", F),
    _l("Make sure the migrations are reversible.", F),
    _l("Prefer composition over inheritance.", F),
    _l("Yes, exactly.", F, assistant="I added an index on the tenant column."),
    _l("That works perfectly, thanks!", F, assistant="I cached the token for five minutes."),
    _l("Good call.", F, assistant="I would pin the Django version in the lock file."),
    # --- project: possessive and plural subjects, dates, decisions, negations ----------
    _l("Our project deadline is March 3rd.", P),
    _l("My team's launch is on April 10.", P),
    _l("The release date is September 30.", P),
    _l("Our deadline was moved to Friday.", P),
    _l("The demo is scheduled for Thursday.", P),
    _l("The MVP is due on the 1st of July.", P),
    _l("Our backend runs on Kubernetes.", P),
    _l("Our servers are hosted on Hetzner.", P),
    _l("Our tests run on GitHub Actions.", P),
    _l("Our team uses trunk-based development.", P),
    _l("The team decided to adopt Ruff.", P),
    _l("We chose Postgres over MongoDB.", P),
    _l("We've decided to rewrite the parser.", P),
    _l("We don't use an ORM.", P),
    _l("The mobile app is written in Kotlin.", P),
    _l("Our frontend uses React 19.", P),
    _l("The project is called Tulip.", P),
    _l("Our main language is TypeScript.", P),
    _l("We're targeting Python 3.12 and up.", P),
    _l("We migrated from Heroku to Render last month.", P),
    _l("We use pnpm, not npm.", P),
    # --- references ---------------------------------------------------------------------
    _l("The API docs are at https://api.example.com/docs.", R),
    _l("More context in JIRA-88.", R),
    _l("Issue 1207 describes the memory leak.", R),
    _l("The architecture notes are in docs/architecture.md.", R),
    _l("Read the security handbook before deploying.", R),
    _l("The style rules are documented in the contributing guide.", R),
    _l("Pull request #77 adds the feature.", R),
    _l("The postmortem is in the incident wiki.", R),
    _l("Our Grafana board: https://grafana.example.net/d/xyz and the alerts in OPS-301.", R, R),
    _l("The spec lives in specs/payments.pdf.", R),
    # --- several facts at once ----------------------------------------------------------
    _l("I'm a tester and our release is next Monday.", U, P),
    _l("I live in Kyiv; see RISK-12 for the travel policy.", U, R),
    _l("We use Celery, and please don't suggest RQ.", P, F),
    _l("My name is Yuki and our deadline is June 30.", U, P),
    _l("The backend is written in Elixir and the frontend uses Elm.", P, P),
    # --- negatives: questions, third parties, speculation, negated roles, small talk ---
    _l("I'm not a manager."),
    _l("I am not based in London."),
    _l("My brother is a doctor in Madrid."),
    _l("My colleague Tom prefers spaces."),
    _l("Our CTO loves microservices."),
    _l("Do you prefer tabs or spaces?"),
    _l("What is my name?"),
    _l("Am I the admin here?"),
    _l("No problem."),
    _l("Nope."),
    _l("Not at all."),
    _l("Thanks a lot!"),
    _l("Exactly!"),  # nothing to confirm: no assistant message before it
    _l("We might switch to Bun someday."),
    _l("We should add caching."),
    _l("Their company uses Oracle."),
    _l("When is the release?"),
    _l("Does our app support dark mode?"),
    _l("What if we dropped Python 3.9?"),
    _l("Suppose the deadline slips, what then?"),
    _l("Which ticket was that?"),
    _l("Is there a doc for this?"),
    _l("Good morning!"),
    _l("Hi!"),
    _l("Hello, how are you?"),
    _l("Hi, I'm back."),
    _l("Hi, I'm new here."),
    _l("I'm sorry, I was away."),
    _l("This is great."),
    _l("It's Friday, finally!"),
    _l("Sure, go ahead."),
    _l("I'm done for today."),
]

HELD_OUT: list[Labelled] = [
    # --- user -------------------------------------------------------------------------
    _l("Hey, I'm Priya.", U),
    _l("Hello! My name's Tomás and I work at Initech.", U, U),
    _l("Hi there, I am Kenji.", U),
    _l("Good morning, this is Marta from the data team.", U),
    _l("I'm Ola, a frontend developer.", U, U),
    _l("I'm Chen, a data analyst at Shopify.", U, U),
    _l("I'm based in Nairobi and my time zone is EAT.", U, U),
    _l("I don't like dark mode.", U),
    _l("I can't stand tabs in YAML files.", U),
    _l("I love Haskell but I hate its build tools.", U, U),
    _l("My favorite shell is fish.", U),
    _l("I prefer answers in French.", U),
    _l("I work as a nurse at St. Mary's Hospital.", U),
    _l("I'm an SRE at Stripe.", U),
    _l("I live in Porto and I work for Farfetch.", U, U),
    # --- feedback ---------------------------------------------------------------------
    _l("No, the tests go in tests/unit, not next to the code.", F),
    _l("Please don't use semicolons in the JavaScript.", F),
    _l("Stop adding type: ignore comments.", F),
    _l("Avoid abbreviations in variable names.", F),
    _l("You must pin every dependency.", F),
    _l("Actually, we want UTC everywhere.", F),
    _l("That's not right, the port is 5433.", F),
    _l(
        "Perfect, that's exactly what I wanted!",
        F,
        assistant="I moved the retry logic into a decorator.",
    ),
    _l("Great, keep doing it this way.", F, assistant="I wrote the test first, then the fix."),
    _l("Yes, spot on.", F, assistant="The slow part is the N+1 query in the serializer."),
    _l("Make sure every endpoint has a test.", F),
    _l("Use British spelling in the docs, please.", F),
    _l("Always answer in English, even if I write in German.", F),
    _l("Nope, it should be async.", F),
    _l("Don't forget to update the changelog.", F),
    # --- project ----------------------------------------------------------------------
    _l("Our launch date is June 1st.", P),
    _l("My team's deadline is next Friday.", P),
    _l("The team's release is scheduled for Q3.", P),
    _l("Our API is written in Rust.", P),
    _l("Our services run on AWS Lambda.", P),
    _l("We use Terraform for all infrastructure.", P),
    _l("Our team decided to move to monthly releases.", P),
    _l("We're not using Docker in production.", P),
    _l("The frontend is built with Svelte.", P),
    _l("Our main database is MySQL 8.", P),
    _l("The code freeze starts on the 20th.", P),
    _l("We agreed on trunk-based development.", P),
    _l("The app is deployed to Fly.io.", P),
    _l("Our repo is a monorepo managed with Nx.", P),
    # --- reference --------------------------------------------------------------------
    _l("The runbook is at https://runbooks.example.org/db-failover.", R),
    _l("Check the API guide before changing the endpoints.", R),
    _l("Bug 8812 explains the crash.", R),
    _l("See ADR-7 for the reasoning.", R),
    _l("The schema is described in docs/schema.rst and the API in openapi.yaml.", R, R),
    _l("Our onboarding checklist lives in the Notion handbook.", R),
    _l("PR 342 has the migration.", R),
    _l("Here's the dashboard: https://grafana.example.com/d/abc123", R),
    _l("The mockups are at https://www.figma.com/file/xyz.", R),
    # --- several facts at once --------------------------------------------------------
    _l("I'm a backend developer and we use FastAPI.", U, P),
    _l("I prefer short commits, and the deadline is May 2.", U, P),
    _l("My name is Lena; our stack is Vue and Laravel.", U, P),
    _l("We're building a mobile app, and I'm the tech lead.", P, U),
    _l("Don't mock the database, and see docs/testing.md for the fixtures.", F, R),
    # --- negatives --------------------------------------------------------------------
    _l("I'm not a developer."),
    _l("I don't live in Berlin anymore."),
    _l("My sister lives in Rome."),
    _l("My manager prefers long reports."),
    _l("Do you like jazz?"),
    _l("Would you prefer a table or a list?"),
    _l("What's my time zone again?"),
    _l("Where do I live, according to you?"),
    _l("Is our deadline still the 15th?"),
    _l("When is the demo?"),
    _l("If we used Kafka, would it scale?"),
    _l("We should probably use Redis."),
    _l("Their team is using Java."),
    _l("Where's the design doc?"),
    _l("Did you read the README?"),
    _l("No thanks, I'm fine."),
    _l("Never mind, I found it."),
    _l("Haha, nice one."),
    _l("Let me think about it."),
    _l("Good night!"),
    _l("I'm so happy it works now."),
    _l("I am the one who asked yesterday."),
    _l("I like how you explained that."),
]

CORPUS: list[Labelled] = [*TUNING, *HELD_OUT]


def conversation(entry: Labelled) -> list[Message]:
    """The entry as a conversation: the assistant turn (if any), then the user's."""
    before = [Message(Role.ASSISTANT, entry.assistant)] if entry.assistant else []
    return [*before, Message(Role.USER, entry.text)]


def precision_recall(
    corpus: list[Labelled],
) -> dict[MemoryType, tuple[float, float, int, int, int]]:
    """Per type: (precision, recall, true positives, false positives, false negatives),
    counted in facts: an utterance stating two facts of a type needs two memories of it."""
    counts = [
        (Counter(m.type for m in extract_heuristic(conversation(e))), Counter(e.expected))
        for e in corpus
    ]
    result = {}
    for memory_type in MemoryType:
        tp = fp = fn = 0
        for predicted, expected in counts:
            found, stated = predicted[memory_type], expected[memory_type]
            tp += min(found, stated)
            fp += max(0, found - stated)
            fn += max(0, stated - found)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        result[memory_type] = (precision, recall, tp, fp, fn)
    return result
