"""moto's request handling made cheaper where it repeats work whose answer cannot change: its response serializer
for the plain dicts most of its answers are built from, and the method list and action name of each request.

moto 5.2 builds every answer (DynamoDB's items, SQS's messages) by walking the operation's output shape and
asking, for each member of each structure, which key of the Python object holds it: six alias providers and
botocore's `xform_name` a member, a context object and a `".".join` of the path a member, whether or not the
member is there. A DynamoDB attribute value is a structure of ten members, one of them set, so a row of twenty
attributes asks two hundred times. Measured here: GetItem and UpdateItem of such rows took half the CPU with the
path below, and the moto-heavy integration tests (the spread test, test_paused) 12-15% less.

For an object that is exactly a `dict` the keys asked do not depend on the object (its class has no `Meta`, and
its class name is always `dict`), only on the member's name, its shape and the shape's parent: they are worked
out once, by moto's own providers, and kept. The answer is then moto's own: the first of those keys the dict
holds, with the picker's response transformers applied as moto applies them. Anything else (a model object, a
picker with other providers, a key with a dot, which moto reads as a path) goes through moto's code unchanged.
`tests/integration/test_moto_speed.py` compares both, member by member and answer by answer, over DynamoDB's and
SQS's calls.

And its TransactWriteItems keeps, to undo a transaction that fails, the items the transaction names, where moto
deep-copies every table it names before each one: a cost that grows with the table, half the moto server's
samples in a `duetime local --backend moto` run at 25 executions/s (a one-off's finish is a transaction), which
made it fall behind. A failed transaction's items are put back as they were (absent ones removed) and the
stream records it added dropped, so the tables end as moto's own rollback leaves them; the test compares the two.

And its SQS ReceiveMessage reads a queue's retention period once a message, where moto reads it through every
attribute of the queue, three times, each attribute count walking every message of the queue: a receive was
quadratic in the queue's depth, 44% of the server's samples with 750 runs delayed in a queue (a 30-s pre-load
window).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from moto.core import responses, serialize, utils
from moto.core.utils import unix_time
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.sqs.models import Message, SQSBackend

_MISSING = object()
# (member name, id of its shape, id of the shape's parent) -> (shape, parent, the keys to try): the shapes are
# kept with their keys so that an id is never taken for a later object's.
_KEYS: dict[tuple[str, int, int], tuple[Any, Any, tuple[str, ...] | None]] = {}
_PICKERS = (serialize.AttributePicker, serialize.XFormedAttributePicker)
_moto_get_value = serialize.ResponseSerializer.get_value
# Every request also listed its handler class's methods (inspect.getmembers, a tenth of a request's CPU in the
# moto server here) and converted its action's name: functions of the class and of the name alone, kept.
# (moto.core.responses calls them by the names it imported from moto.core.utils: those are replaced.)
_moto_method_names = utils.method_names_from_class
_moto_underscores = utils.camelcase_to_underscores
_KEPT = {
    "method_names_from_class": functools.cache(_moto_method_names),
    "camelcase_to_underscores": functools.lru_cache(maxsize=4096)(_moto_underscores),
}
_MOTOS = {"method_names_from_class": _moto_method_names, "camelcase_to_underscores": _moto_underscores}


def _keys_of_a_dict(picker: Any, key: str, shape: Any) -> tuple[str, ...] | None:
    """The keys moto's `picker` tries, in order, for member `key` of a plain dict; None if one holds a dot."""
    parent = getattr(shape, "parent", None)
    cache_key = (key, id(shape), id(parent))
    hit = _KEYS.get(cache_key)
    if hit is not None and hit[0] is shape and hit[1] is parent:
        return hit[2]
    context = serialize.AttributePickerContext(obj={}, key=key, shape=shape)
    found = tuple(picker.get_possible_keys(context))
    keys = None if any("." in k for k in found) else found
    _KEYS[cache_key] = (shape, parent, keys)
    return keys


def _get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
    picker = self._value_picker
    if (
        type(value) is not dict
        or type(picker) not in _PICKERS
        or picker.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS
    ):
        return _moto_get_value(self, value, key, shape)
    keys = _keys_of_a_dict(picker, key, shape)
    if keys is None:
        return _moto_get_value(self, value, key, shape)
    found = None
    for possible in keys:
        candidate = value.get(possible, _MISSING)
        if candidate is not _MISSING:
            found = candidate
            break
    if picker.response_transformers:
        key_path = f"{'.'.join(self.path)}.{key}"
        for transform_path, transform in picker.response_transformers.items():
            if key_path.endswith(transform_path):
                return transform(found)
    return found


class _CopyKeepingTables:
    """`copy` as moto.dynamodb.models sees it once installed: a deep copy of a Table is the table itself (only
    TransactWriteItems's backup asks for one, and _transact_write_items keeps its items instead); anything else is
    copied as ever."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


_moto_transact_write_items = dynamodb_models.DynamoDBBackend.transact_write_items
# (table, hash key, range key or None, a copy of the item before the transaction or None, the table's stream
# records before it)
_Saved = tuple[Table, DynamoType, DynamoType | None, Item | None, int]


def _items_before(backend: Any, transact_items: list[dict[str, Any]]) -> list[_Saved]:
    """A copy of each item the transaction names, as it is now (None: absent). An operation whose key cannot be
    read is skipped: moto refuses it before it writes anything of it."""
    saved: list[_Saved] = []
    for entry in transact_items:
        for op_type, op in entry.items():
            table = backend.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            key = op.get("Item" if op_type == "Put" else "Key") if table is not None else None
            if table is None or not isinstance(key, dict) or table.hash_key_attr not in key:
                continue
            if table.range_key_attr is not None and table.range_key_attr not in key:
                continue
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
            before = table.get_item(hash_value, range_value)
            records = len(table.stream_shard.items) if table.stream_shard is not None else 0
            saved.append((table, hash_value, range_value, copy.deepcopy(before), records))
    return saved


def _put_back(saved: list[_Saved]) -> None:
    for table, hash_value, range_value, before, records in reversed(saved):
        if before is None:
            table.delete_item(hash_value, range_value)
        elif range_value is not None:
            table.items[hash_value][range_value] = before
        else:
            table.items[hash_value] = before  # type: ignore[assignment]
        if table.stream_shard is not None:
            del table.stream_shard.items[records:]


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto's TransactWriteItems, undone item by item if it fails (module docstring)."""
    saved = _items_before(self, transact_items)
    try:
        _moto_transact_write_items(self, transact_items)
    except Exception:
        _put_back(saved)
        raise


_moto_retention_check = SQSBackend.is_message_valid_based_on_retention_period


def _within_retention(self: SQSBackend, queue_name: str, message: Message) -> bool:
    """moto's check of a received message against its queue's retention period, the period read alone."""
    retention_period = int(vars(self.get_queue(queue_name))["message_retention_period"])  # set by its attributes
    return retention_period + (message.sent_timestamp or 0) / 1000 > unix_time()


def install() -> None:
    """Make moto's serializers take the plain-dict path above, its transactions keep their items instead of
    their tables, and its receives read a queue's retention period alone, in this process (idempotent)."""
    serialize.ResponseSerializer.get_value = _get_value  # type: ignore[method-assign]
    vars(responses).update(_KEPT)
    vars(dynamodb_models)["copy"] = _CopyKeepingTables()
    dynamodb_models.DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign]


def uninstall() -> None:
    serialize.ResponseSerializer.get_value = _moto_get_value  # type: ignore[method-assign]
    vars(responses).update(_MOTOS)
    vars(dynamodb_models)["copy"] = copy
    dynamodb_models.DynamoDBBackend.transact_write_items = _moto_transact_write_items  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = _moto_retention_check  # type: ignore[method-assign]
