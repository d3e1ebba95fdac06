"""Recall of the stores on LoCoMo: recall@1/5/10 and search p50 / p95 per configuration.

The two development conversations of LoCoMo (``../shared/data/locomo-dev`` from the repo
root, or ``$TULIP_LOCOMO_DIR``; read at run time, never copied) are loaded into every
configuration of ``CONFIGS`` through its public API: each turn is one item in namespace
``("bench", "locomo", "conv<id>")``, key = its ``dia_id``, value ``{"text": "<speaker>:
<text>[ shares a photo: <caption>]", "date": <session date>}``. Each question of categories
1-4 with evidence is one ``search(namespace, question, limit=10)``; recall@k is the share
of its evidence ids among the first k keys, averaged over the questions.

Configurations that need PostgreSQL run in a child process per vector width (the width of
PgMemory's vector column is fixed when the migrations run): an embedded PostgreSQL 18 +
pgvector in a temporary folder, Django on it (``embedded_django.setup_django``). Once a
configuration's items are loaded, its database is ``ANALYZE``d (as autovacuum would a
live table), then the questions are timed.
``bench/recall_prototypes`` holds the ranking prototypes measured next to today's stores.

    .venv/bin/python bench/recall.py [--only NAME ...] [--plot docs/recall-latency.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TENANT = "bench"
LIMIT = 10
WORDLLAMA_DIM = 256  # WordLlamaEmbedding's default width
HRR_WIDTH = 1024  # PgMemory's default: 2 * dim with dim = 512


# -- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    namespace: tuple[str, ...]
    items: list[tuple[str, dict[str, str]]]
    questions: list[tuple[str, frozenset[str]]]


def data_dir() -> Path:
    """``$TULIP_LOCOMO_DIR``, else ``../shared/data/locomo-dev`` from the repo root (from the
    main checkout's root when this runs in a git worktree)."""
    override = os.environ.get("TULIP_LOCOMO_DIR")
    if override:
        return Path(override)
    roots = [REPO]
    common = subprocess.run(
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if common.returncode == 0:
        roots.append(Path(common.stdout.strip()).parent)
    candidates = [root.parent / "shared" / "data" / "locomo-dev" for root in roots]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def load_conversations() -> list[Conversation]:
    conversations = []
    for path in sorted(data_dir().glob("*.json")):
        raw = json.loads(path.read_text())
        items = []
        session = 1
        while f"session_{session}" in raw:
            date = raw.get(f"session_{session}_date_time", "")
            for turn in raw[f"session_{session}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" shares a photo: {turn['blip_caption']}"
                items.append((turn["dia_id"], {"text": text, "date": date}))
            session += 1
        questions = [
            (qa["question"], frozenset(qa["evidence"]))
            for qa in raw["qa"]
            if qa.get("category") in (1, 2, 3, 4) and qa.get("evidence")
        ]
        conversations.append(Conversation((TENANT, "locomo", f"conv{path.stem}"), items, questions))
    if not conversations:
        raise SystemExit(f"no LoCoMo conversations in {data_dir()} (set TULIP_LOCOMO_DIR)")
    return conversations


# -- what is measured -----------------------------------------------------------------------


class Subject(Protocol):
    """One configuration, ready to load items and answer searches (keys, best first)."""

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None: ...

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]: ...


class StoreSubject:
    """A ``BaseStore`` through its public API: ``put_batch`` then ``search``."""

    def __init__(self, store: Any, **search_options: Any) -> None:
        self.store = store
        self.search_options = search_options

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        for start in range(0, len(items), 500):
            await self.store.put_batch(
                [(namespace, k, v, None) for k, v in items[start : start + 500]]
            )

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        found = await self.store.search(namespace, query, limit=limit, **self.search_options)
        return [item.key for item in found]


class PgPartSubject(StoreSubject):
    """One part of PgMemory's hybrid statement alone (``part`` "lexical" or "vector"):
    the store's own statement (``search_paths``) with the other part left out."""

    def __init__(self, store: Any, part: str) -> None:
        super().__init__(store)
        self.part = part

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        from tulip_memory.core.text import tokenize
        from tulip_memory.postgres.operations import text_search_config
        from tulip_memory.store.ranking import BM25_B, BM25_K1

        encoder = self.store.encoder
        if self.part == "lexical":
            ranking = {
                "terms": sorted(set(tokenize(query))),
                "config": text_search_config(),
                "bm25": (BM25_K1, BM25_B),
            }
        else:
            encoded = await encoder.encode(namespace[0], query)
            ranking = {"vector": encoder.literal(encoded), "source": encoder.source}
        rows = await self.store._run(
            self.store._search_sync, namespace[0], [namespace], limit, **ranking
        )
        return [row.key for row in rows]


class LangGraphSubject:
    """LangGraph's ``AsyncPostgresStore`` (its default HNSW cosine index) with our embedder."""

    def __init__(self, admin_url: str, embedder: Any) -> None:
        self.admin_url = admin_url
        self.embedder = embedder
        self.store: Any = None
        self._context: Any = None

    async def _open(self) -> Any:
        if self.store is None:
            from langgraph.store.postgres import AsyncPostgresStore

            index = {
                "dims": self.embedder.dimension,
                "embed": self.embedder.embed_batch,
                "fields": ["text"],
            }
            self._context = AsyncPostgresStore.from_conn_string(self.admin_url, index=index)
            self.store = await self._context.__aenter__()
            await self.store.setup()
        return self.store

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        from langgraph.store.base import PutOp

        store = await self._open()
        await store.abatch([PutOp(namespace, key, value) for key, value in items])

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        hits = await self.store.asearch(namespace, query=query, limit=limit)
        return [hit.key for hit in hits]


class Fts5Keyword:
    """The keyword baseline: SQLite FTS5 BM25 over the value text, OR of the query's words."""

    def __init__(self, tokenizer: str = "unicode61") -> None:
        import sqlite3

        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(ns UNINDEXED, key UNINDEXED, body, "
            f"tokenize='{tokenizer}')"
        )

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        from tulip_memory.core.text import value_text

        ns = "/".join(namespace)
        self.db.executemany(
            "INSERT INTO t (ns, key, body) VALUES (?, ?, ?)",
            [(ns, key, value_text(value)) for key, value in items],
        )

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        from tulip_memory.core.text import tokenize

        words = sorted(set(tokenize(query)))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT key FROM t WHERE t MATCH ? AND ns = ? ORDER BY bm25(t) LIMIT ?",
            (match, "/".join(namespace), limit),
        ).fetchall()
        return [row[0] for row in rows]


@dataclass
class Context:
    """What factories may need: the PostgreSQL admin URL (PostgreSQL configurations only)."""

    admin_url: str | None = None
    _wordllama: Any = None

    def wordllama(self) -> Any:
        if self._wordllama is None:
            from tulip_memory.embeddings import WordLlamaEmbedding

            self._wordllama = WordLlamaEmbedding()
        return self._wordllama


@dataclass(frozen=True)
class Config:
    """One line of the table: ``width`` is PgMemory's vector column (None: no PostgreSQL)."""

    name: str
    make: Callable[[Context], Subject]
    width: int | None = None


def store(
    cls_name: str, wordllama: bool = False, **search_options: Any
) -> Callable[[Context], Subject]:
    """A store as built (``wordllama``: with ``embedder=WordLlamaEmbedding()``);
    ``search_options`` go to each ``search`` (HolographicStore's ``mode``)."""

    def make(ctx: Context) -> Subject:
        import tulip_memory.store as stores

        options = {"embedder": ctx.wordllama()} if wordllama else {}
        return StoreSubject(getattr(stores, cls_name)(**options), **search_options)

    return make


def pg_part(part: str, wordllama: bool = False) -> Callable[[Context], Subject]:
    def make(ctx: Context) -> Subject:
        from tulip_memory.store import PgMemory

        return PgPartSubject(PgMemory(embedder=ctx.wordllama() if wordllama else None), part)

    return make


def langgraph(ctx: Context) -> Subject:
    return LangGraphSubject(ctx.admin_url or "", ctx.wordllama())


def proto(kind: str, wordllama: bool = False, **options: Any) -> Callable[[Context], Subject]:
    """A prototype of ``bench/recall_prototypes``: ``bm25``, ``fts5`` or ``pg``."""

    def make(ctx: Context) -> Subject:
        import recall_prototypes as p

        embedder = ctx.wordllama() if wordllama else None
        if kind == "bm25":
            return p.Bm25Subject(embedder, **options)
        if kind == "fts5":
            return p.Fts5Subject(**options)
        return p.PgHybrid(ctx, embedder, **options)

    return make


HRR, WL = HRR_WIDTH, WORDLLAMA_DIM
BM25_ONLY = {"lexical": "bm25", "vector": False}
CONFIGS: list[Config] = [
    # today's stores, LangGraph, and the keyword baseline
    Config("keyword-fts5-bm25", lambda ctx: Fts5Keyword()),
    Config("InMemoryStore", store("InMemoryStore")),
    Config("HolographicStore", store("HolographicStore")),
    Config("PgMemory-HRR", store("PgMemory"), HRR),
    Config("PgMemory-WordLlama", store("PgMemory", wordllama=True), WL),
    Config("LangGraph-WordLlama", langgraph, WL),
    # the stores' parts alone (hybrid >= each part)
    Config("HolographicStore-lexical", store("HolographicStore", mode="lexical")),
    Config("HolographicStore-hrr", store("HolographicStore", mode="hrr")),
    Config("InMemoryStore-WordLlama", store("InMemoryStore", wordllama=True)),
    Config("HolographicStore-WordLlama", store("HolographicStore", wordllama=True)),
    Config("PgMemory-lexical", pg_part("lexical"), HRR),
    Config("PgMemory-HRR-vector", pg_part("vector"), HRR),
    Config("PgMemory-WordLlama-vector", pg_part("vector", wordllama=True), WL),
    # in-process BM25 over analysed terms (the InMemoryStore design)
    Config("proto-bm25-stem", proto("bm25")),
    Config("proto-bm25-nostem", proto("bm25", stem=False)),
    Config("proto-bm25-stem-keepstop", proto("bm25", stop=False)),
    Config("proto-wordllama-only", proto("bm25", True, lexical=False)),
    Config("proto-bm25+wordllama-rrf60", proto("bm25", True, k=60)),
    Config("proto-bm25+wordllama-rrf20", proto("bm25", True, k=20)),
    Config("proto-bm25+wordllama-w.5", proto("bm25", True, weights=(1, 0.5))),
    Config("proto-bm25+wordllama-w.3", proto("bm25", True, weights=(1, 0.3))),
    Config("proto-bm25+wordllama-w.2", proto("bm25", True, weights=(1, 0.2))),
    Config("proto-bm25+wordllama-a.3", proto("bm25", True, alpha=0.3)),
    Config("proto-bm25+wordllama-a.5", proto("bm25", True, alpha=0.5)),
    Config("proto-bm25+wordllama-a1", proto("bm25", True, alpha=1.0)),
    # SQLite FTS5 porter (the HolographicStore design)
    Config("proto-fts5-porter", proto("fts5", hrr=False)),
    Config("proto-hrr-only", proto("fts5", lexical=False)),
    Config("proto-fts5-porter+hrr-rrf60", proto("fts5", k=60)),
    Config("proto-fts5-porter+hrr-rrf20", proto("fts5", k=20)),
    Config("proto-fts5-porter+hrr-w.3", proto("fts5", weights=(1, 0.3))),
    Config("proto-fts5-porter+hrr-a.3", proto("fts5", alpha=0.3)),
    Config("proto-fts5-porter+hrr-a.5", proto("fts5", alpha=0.5)),
    Config("proto-fts5-porter+hrr-a1", proto("fts5", alpha=1.0)),
    # one PostgreSQL statement (the PgMemory design), HRR vectors
    Config("proto-pg-tsv-english", proto("pg", vector=False), HRR),
    Config("proto-pg-tsv-simple", proto("pg", config="simple", vector=False), HRR),
    Config("proto-pg-hrr+tsv-rrf60", proto("pg", k=60), HRR),
    Config("proto-pg-hrr+tsv-rrf20", proto("pg", k=20), HRR),
    Config("proto-pg-bm25-english", proto("pg", **BM25_ONLY), HRR),
    Config("proto-pg-bm25-stored", proto("pg", **BM25_ONLY, stored=True), HRR),
    Config("proto-pg-hrr+bm25-rrf60", proto("pg", lexical="bm25"), HRR),
    Config("proto-pg-hrr+bm25-w.3", proto("pg", lexical="bm25", weights=(1, 0.3)), HRR),
    Config("proto-pg-hrr+bm25-a.3", proto("pg", lexical="bm25", alpha=0.3), HRR),
    Config("proto-pg-hrr+bm25-a.5", proto("pg", lexical="bm25", alpha=0.5), HRR),
    Config(
        "proto-pg-hrr+bm25-stored-a.3", proto("pg", lexical="bm25", alpha=0.3, stored=True), HRR
    ),
    # the same with WordLlama vectors
    Config("proto-pg-wl-tsv-english", proto("pg", True, vector=False), WL),
    Config("proto-pg-wl+tsv-rrf60", proto("pg", True, k=60), WL),
    Config("proto-pg-wl+tsv-rrf20", proto("pg", True, k=20), WL),
    Config("proto-pg-wl+bm25-rrf60", proto("pg", True, lexical="bm25"), WL),
    Config("proto-pg-wl+bm25-rrf20", proto("pg", True, lexical="bm25", k=20), WL),
    Config("proto-pg-wl+bm25-a.3", proto("pg", True, lexical="bm25", alpha=0.3), WL),
    Config("proto-pg-wl+bm25-a.5", proto("pg", True, lexical="bm25", alpha=0.5), WL),
    Config("proto-pg-wl+bm25-a1", proto("pg", True, lexical="bm25", alpha=1.0), WL),
    Config(
        "proto-pg-wl+bm25-stored-a.5", proto("pg", True, lexical="bm25", alpha=0.5, stored=True), WL
    ),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def analyze(url: str) -> None:
    """``ANALYZE`` the database at ``url`` (the tables that role owns): what autovacuum
    does to a live table soon after a load. Without it the planner sees the just-loaded
    tables as nearly empty, and every PostgreSQL store is timed on plans no deployment
    keeps for long."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


async def measure(
    config: Config, ctx: Context, conversations: list[Conversation]
) -> dict[str, Any]:
    subject = config.make(ctx)
    for conv in conversations:
        await subject.load(conv.namespace, conv.items)
    if hasattr(subject, "prepare"):  # a prototype's own indexes and columns
        await subject.prepare()
    if ctx.admin_url is not None:
        analyze(ctx.admin_url)
    await subject.search(conversations[0].namespace, conversations[0].questions[0][0], LIMIT)
    hits: dict[int, list[float]] = {1: [], 5: [], 10: []}
    timings: list[float] = []
    for conv in conversations:
        for question, evidence in conv.questions:
            started = time.perf_counter()
            keys = await subject.search(conv.namespace, question, LIMIT)
            timings.append(time.perf_counter() - started)
            for k, shares in hits.items():
                shares.append(len(evidence & set(keys[:k])) / len(evidence))
    return {
        "name": config.name,
        "questions": len(timings),
        **{f"r@{k}": statistics.mean(v) for k, v in hits.items()},
        "p50_ms": statistics.median(timings) * 1000,
        "p95_ms": percentile(timings, 0.95) * 1000,
    }


def run_group(configs: list[Config], ctx: Context) -> list[dict[str, Any]]:
    conversations = load_conversations()

    async def all_of_them() -> list[dict[str, Any]]:
        out = []
        for config in configs:
            result = await measure(config, ctx, conversations)
            print(json.dumps(result), flush=True)
            out.append(result)
        return out

    return asyncio.run(all_of_them())


def run_postgres_group(width: int, names: list[str]) -> list[dict[str, Any]]:
    """In a child: its own embedded PostgreSQL with a ``width``-wide vector column."""
    command = [sys.executable, __file__, "--child-width", str(width), "--only", *names]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=REPO)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6.5))
    placed: list[tuple[float, float, int]] = []
    for r in sorted(results, key=lambda r: r["p95_ms"]):
        proto = r["name"].startswith("proto-")
        ax.scatter(r["p95_ms"], r["r@10"], c="tab:blue" if proto else "tab:red", s=25)
        # A label near an earlier one (close in recall, within 60% in latency) goes one
        # line lower, so that neighbours' names do not print over each other.
        line = sum(1 for x, y, _ in placed if abs(y - r["r@10"]) < 0.01 and r["p95_ms"] < x * 1.6)
        placed.append((r["p95_ms"], r["r@10"], line))
        ax.annotate(
            r["name"],
            (r["p95_ms"], r["r@10"]),
            fontsize=7,
            xytext=(3, 3 - 10 * line),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ax.set_xlim(low, high * 1.6)  # room for the labels of the slowest points
    ax.set_xlabel("search p95 (ms, log scale)")
    ax.set_ylabel("recall@10")
    title = "LoCoMo dev (2 conversations, 231 questions)"
    if any(r["name"].startswith("proto-") for r in results):
        title += ": red = the stores, blue = prototypes"
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="configurations to run")
    parser.add_argument("--plot", type=Path, help="write recall@10 vs p95 to this PNG")
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--child-width", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    chosen = [c for c in CONFIGS if not args.only or c.name in args.only]
    unknown = set(args.only or ()) - {c.name for c in CONFIGS}
    if unknown:
        parser.error(
            f"unknown configuration(s) {sorted(unknown)}; known: {[c.name for c in CONFIGS]}"
        )
    if args.child_width is not None:
        from embedded_django import embedded_workdir, setup_django

        with embedded_workdir("tulip-bench-recall-") as tmp:
            db = setup_django(Path(tmp), VECTOR_DIMENSIONS=args.child_width)
            run_group(chosen, Context(admin_url=db.admin))
        return
    results = run_group([c for c in chosen if c.width is None], Context())
    for width in sorted({c.width for c in chosen if c.width is not None}):
        results += run_postgres_group(width, [c.name for c in chosen if c.width == width])
    order = {c.name: i for i, c in enumerate(CONFIGS)}
    results.sort(key=lambda r: order[r["name"]])
    print(f"\n{'configuration':<32} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for r in results:
        print(
            f"{r['name']:<32} {r['r@1']:>6.3f} {r['r@5']:>6.3f} {r['r@10']:>6.3f} "
            f"{r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
