"""Demo scene: the cross-thread store on one SQLite file (HolographicStore).

A user's memories are written through StoreContext, searched (full-text and HRR fused),
updated (the version counts writes), found again after the file is reopened, refused when
the input is bad, and recalled by meaning with the WordLlama embedder when the
``embeddings`` extra is installed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TextIO

from tulip_memory.store import HolographicStore, StoreContext

MEMORIES = {
    "diet": "Eats no meat; loves spicy Sichuan tofu",
    "theme": "Prefers dark mode in every app",
    "trip": "Planning a trip to Kyoto in April, cherry blossom season",
    "pet": "Has a cat named Miso who hates the vacuum cleaner",
}


async def store_scene(out: TextIO) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.sqlite3"
        store = HolographicStore(path)
        context = StoreContext(store, user_id="ada")
        for key, text in MEMORIES.items():
            await context.remember(key, {"text": text}, {"source": "chat"})
        out.write(f"Wrote {len(MEMORIES)} memories of user 'ada' to {path.name}\n")

        for query in ("kyoto cherry april", "spicy tofu", "what does the cat hate"):
            hits = await context.search_memories(query, limit=2)
            found = ", ".join(f"{item.key} (v{item.version})" for item in hits) or "nothing"
            out.write(f"  search {query!r:<26} -> {found}\n")

        await context.remember("trip", {"text": "Trip to Kyoto moved to May"})
        item = await store.get_item(("users", "ada", "memories"), "trip")
        out.write(
            f"Updated 'trip': version {item.version}, created {item.created_at:%H:%M:%S.%f}, "
            f"updated {item.updated_at:%H:%M:%S.%f}\n"
        )
        await store.close()

        reopened = HolographicStore(path)
        again = await reopened.get(("users", "ada", "memories"), "trip")
        out.write(f"Reopened the file: 'trip' is still {again['text']!r}\n")
        try:
            await reopened.put(("users", "ada"), "score", float("nan"))
        except ValueError as exc:
            out.write(f"Bad input refused, nothing written: {exc}\n")
        await _semantic(reopened, out)
        await reopened.close()


async def _semantic(store: HolographicStore, out: TextIO) -> None:
    try:
        from tulip_memory.embeddings import WordLlamaEmbedding

        embedder = WordLlamaEmbedding()
    except ImportError as exc:
        out.write(f"Semantic recall skipped: {exc}\n")
        return
    namespace = ("users", "ada", "semantic")
    texts = list(MEMORIES.values())
    for key, vector, text in zip(MEMORIES, await embedder.embed_batch(texts), texts, strict=True):
        await store.put_with_embedding(namespace, key, {"text": text}, vector)
    question = "which colour scheme should the UI use?"
    results = await store.search_by_embedding(namespace, await embedder.embed(question), limit=2)
    ranked = ", ".join(f"{r.item.key} ({r.score:.2f})" for r in results)
    out.write(f"Semantic recall (WordLlama) for {question!r}: {ranked}\n")
