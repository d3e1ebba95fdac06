"""S3Checkpointer (alias ``S3Backend``): checkpoints as objects in an S3-compatible bucket (boto3).

``<prefix><thread>/data/<checkpoint>.json`` holds the state and its save order;
``<prefix><thread>/order/<inverted>.<checkpoint>`` markers list newest first in one page.
A save writes its marker, then the data, then drops the replaced marker; readers skip a
marker whose data carries another order, so a crash never hides a re-saved checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from tulip_memory.backends.base import (
    BlockingCheckpointer,
    decode_name,
    decode_state,
    encode_name,
    encode_state,
    import_optional,
    save_order_key,
)
from tulip_memory.state import AgentState

__all__ = ["S3Backend", "S3Checkpointer"]

_ORDER_SPAN = 10**20


class S3Checkpointer(BlockingCheckpointer):
    """Checkpoints in ``bucket`` under ``prefix``, through ``client`` or one built from
    ``client_options``; ``create_bucket`` creates a missing bucket."""

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "tulip-memory/checkpoints/",
        client: Any = None,
        create_bucket: bool = False,
        **client_options: Any,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"bucket must be a non-empty str, got {bucket!r}")
        if not isinstance(prefix, str):
            raise ValueError(f"prefix must be a str, got {type(prefix).__name__}")
        boto3 = import_optional("boto3", "s3")
        self.bucket = bucket
        self.prefix = prefix
        self.client = client if client is not None else boto3.client("s3", **client_options)
        self._errors = import_optional("botocore.exceptions", "s3")
        if create_bucket:
            try:
                self.client.head_bucket(Bucket=bucket)
            except self._errors.ClientError:
                self.client.create_bucket(Bucket=bucket)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} bucket={self.bucket!r} prefix={self.prefix!r}>"

    async def aclose(self) -> None:
        self.client.close()
        await super().aclose()

    def _thread_prefix(self, thread_id: str) -> str:
        return f"{self.prefix}{encode_name(thread_id)}/"

    def _data_key(self, thread_id: str, checkpoint_id: str) -> str:
        return f"{self._thread_prefix(thread_id)}data/{encode_name(checkpoint_id)}.json"

    def _marker_key(self, thread_id: str, checkpoint_id: str, order: int) -> str:
        inverted = _ORDER_SPAN - order
        return f"{self._thread_prefix(thread_id)}order/{inverted:020d}.{encode_name(checkpoint_id)}"

    def _object_call(self, operation: str, key: str) -> dict[str, Any] | None:
        try:
            return getattr(self.client, operation)(Bucket=self.bucket, Key=key)
        except self._errors.ClientError as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise

    def _get(self, key: str) -> tuple[bytes, dict[str, str]] | None:
        response = self._object_call("get_object", key)
        return None if response is None else (response["Body"].read(), response.get("Metadata", {}))

    def _stored_order(self, key: str) -> int | None:
        response = self._object_call("head_object", key)
        return None if response is None else int(response.get("Metadata", {}).get("order", "0"))

    def _keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"]

    def _live_ids(self, thread_id: str) -> Iterator[str]:
        """The thread's checkpoints, newest first: markers whose data carries their order."""
        marker_prefix = f"{self._thread_prefix(thread_id)}order/"
        seen: set[str] = set()
        for key in self._keys(marker_prefix):
            inverted, _, encoded = key[len(marker_prefix) :].partition(".")
            checkpoint_id = decode_name(encoded)
            if checkpoint_id is None:  # hashed name: the marker's body holds the id
                found = self._get(key)
                if found is None:
                    continue
                checkpoint_id = found[0].decode()
            if checkpoint_id in seen:
                continue
            order = self._stored_order(self._data_key(thread_id, checkpoint_id))
            if order == _ORDER_SPAN - int(inverted):
                seen.add(checkpoint_id)
                yield checkpoint_id

    def _save_sync(
        self, state: AgentState, thread_id: str, checkpoint_id: str, may_exist: bool
    ) -> None:
        data_key = self._data_key(thread_id, checkpoint_id)
        previous = self._stored_order(data_key) if may_exist else None
        body = encode_state(state)  # may raise: before any write
        order = save_order_key()
        # The marker first: until the data object carries its order, readers skip it
        # and still list the checkpoint under its old marker (see the module docstring).
        self.client.put_object(
            Bucket=self.bucket,
            Key=self._marker_key(thread_id, checkpoint_id, order),
            Body=checkpoint_id.encode(),
        )
        self.client.put_object(
            Bucket=self.bucket,
            Key=data_key,
            Body=body,
            ContentType="application/json",
            Metadata={"order": str(order)},
        )
        if previous is not None:
            self._delete_keys([self._marker_key(thread_id, checkpoint_id, previous)])

    def _load_sync(self, thread_id: str, checkpoint_id: str | None) -> AgentState | None:
        if checkpoint_id is None:
            for live_id in self._live_ids(thread_id):
                found = self._get(self._data_key(thread_id, live_id))
                if found is not None:
                    return decode_state(found[0], thread_id, live_id)
            return None
        found = self._get(self._data_key(thread_id, checkpoint_id))
        return None if found is None else decode_state(found[0], thread_id, checkpoint_id)

    def _list_sync(self, thread_id: str, limit: int) -> list[str]:
        return list(islice(self._live_ids(thread_id), limit))

    def _delete_sync(self, thread_id: str, checkpoint_id: str | None) -> bool:
        if checkpoint_id is None:
            keys = list(self._keys(self._thread_prefix(thread_id)))
            data_prefix = f"{self._thread_prefix(thread_id)}data/"
            had_data = any(key.startswith(data_prefix) for key in keys)
            self._delete_keys(keys)
            return had_data
        data_key = self._data_key(thread_id, checkpoint_id)
        order = self._stored_order(data_key)
        if order is None:
            return False
        self._delete_keys([data_key, self._marker_key(thread_id, checkpoint_id, order)])
        return True

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes up to 1000 keys
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})


# The backend's first name, kept so that code importing it keeps working.
S3Backend = S3Checkpointer
