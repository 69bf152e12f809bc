"""A model configuration given as JSON (the load API's ``config`` parameter, what a
model's ``auto_complete_config`` returns), read as Triton 2.51's protobuf JSON parser
reads it.

That parser is more lenient than the JSON mapping protobuf specifies, and users' hand-
written overrides lean on it. Checked against real Triton 2.51:

* a repeated field takes a list, nested lists flattened and ``null`` elements skipped
  (``[[a], null, [b]]`` is ``[a, b]``), or a single value (``{"count": 2}`` for
  ``instance_group``, ``4`` for ``dims``); named twice, its values add up;
* a map field named twice merges its entries; a key twice inside one map is an error;
* a singular scalar named twice keeps its last value; a singular message named twice is
  an error;
* ``null`` leaves any field at its default;
* enum names are read in any case and with ``-`` for ``_`` (``"type-fp32"``), booleans
  also from text (``"yes"``, ``"f"``, ``"1"``).

What is left is handed to protobuf's own JSON parser, which checks names, types and
values (an unknown field is an error, as in Triton).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from .model_config_pb2 import ModelConfig

__all__ = ["OverrideError", "is_map", "is_repeated", "read_override"]


class OverrideError(Exception):
    """The override is not a configuration Triton's parser takes (the reason)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its members in order, repeated names kept."""


def read_override(text: str) -> ModelConfig:
    """The configuration of the JSON ``text``."""
    import json

    try:
        doc = json.loads(text, object_pairs_hook=_Object)
    except (ValueError, RecursionError) as e:
        raise OverrideError(f"not JSON: {e}") from None
    if not isinstance(doc, _Object):
        raise OverrideError("not a JSON object")
    config = ModelConfig()
    try:
        json_format.ParseDict(_message(doc, config.DESCRIPTOR), config)
    except (json_format.ParseError, RecursionError) as e:
        raise OverrideError(str(e)) from None
    return config


def _message(members: _Object, descriptor: Any) -> dict[str, Any]:
    """The members of one message as a plain dict, the rules above applied."""
    out: dict[str, Any] = {}
    singular_messages: set[str] = set()
    for name, value in members:
        field = descriptor.fields_by_name.get(name) or _by_json_name(descriptor, name)
        if field is None:
            out[name] = _plain(value)  # (protobuf's parser names the unknown field)
        elif value is None:
            continue
        elif is_map(field):
            _merge_map(out.setdefault(field.name, {}), value, field)
        elif is_repeated(field):
            out.setdefault(field.name, []).extend(_elements(value, field))
        elif field.message_type is not None:
            if field.name in singular_messages:
                raise OverrideError(f"'{name}' is given twice")
            singular_messages.add(field.name)
            out[field.name] = _value(value, field)
        else:
            out[field.name] = _scalar(value, field)
    return out


def is_repeated(field: Any) -> bool:
    """Whether a field is repeated (any protobuf this package supports)."""
    flag = getattr(field, "is_repeated", None)  # protobuf >= 6 dropped ``label``
    if flag is not None:
        return bool(flag)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _by_json_name(descriptor: Any, name: str) -> FieldDescriptor | None:
    found: list[FieldDescriptor] = [f for f in descriptor.fields if f.json_name == name]
    return found[0] if found else None


def is_map(field: Any) -> bool:
    """Whether a field is a map (a repeated message of map entries)."""
    message = field.message_type
    return message is not None and bool(message.GetOptions().map_entry)


def _merge_map(into: dict[str, Any], value: Any, field: FieldDescriptor) -> None:
    if not isinstance(value, _Object):
        into[""] = _plain(value)  # (not an object: protobuf's parser refuses it)
        return
    entry_value = field.message_type.fields_by_name["value"]  # type: ignore[union-attr]
    for key, item in value:
        if key in into:
            raise OverrideError(f"key '{key}' is given twice in '{field.name}'")
        into[key] = _value(item, entry_value)


def _elements(value: Any, field: FieldDescriptor) -> list[Any]:
    """A repeated field's value as its elements: nested lists flattened, nulls left out,
    a single value as one element."""
    flat: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list) and not isinstance(item, _Object):
            stack.extend(reversed(item))
        elif item is not None:
            flat.append(_value(item, field))
    return flat


def _value(value: Any, field: FieldDescriptor) -> Any:
    if field.message_type is not None and isinstance(value, _Object):
        return _message(value, field.message_type)
    return _scalar(value, field)


_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


def _scalar(value: Any, field: FieldDescriptor) -> Any:
    """A scalar as protobuf's parser takes it: Triton's also reads enum names in any case
    and with ``-`` for ``_`` (``"type-fp32"``), and booleans written as text (``"no"``)."""
    if isinstance(value, str):
        if field.type == FieldDescriptor.TYPE_ENUM:
            return value.upper().replace("-", "_")
        if field.type == FieldDescriptor.TYPE_BOOL:
            text = value.lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
    return _plain(value)


def _plain(value: Any) -> Any:
    """A JSON value with its objects as dicts (a repeated name: the last value), for
    protobuf's parser to judge."""
    if isinstance(value, _Object):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
