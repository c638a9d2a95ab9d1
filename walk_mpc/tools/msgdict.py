"""ROS message <-> plain dict/JSON conversion (no dependency on rosidl_runtime_py)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np


def message_type(name: str):
    """Message class from 'pkg/msg/Type' (or 'pkg/Type').

    Raises:
        ValueError: If the name is malformed or the type does not exist.
    """
    parts = name.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3:
        raise ValueError(f"message type '{name}' is not of the form pkg/msg/Type")
    try:
        return getattr(importlib.import_module(f"{parts[0]}.{parts[1]}"), parts[2])
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"message type '{name}' not found: {exc}") from exc


def to_dict(msg: Any) -> Any:
    """Nested plain-Python value of a message (lists for arrays)."""
    if hasattr(msg, "get_fields_and_field_types"):
        return {field: to_dict(getattr(msg, field)) for field in msg.get_fields_and_field_types()}
    if isinstance(msg, (list, tuple)):
        return [to_dict(v) for v in msg]
    if isinstance(msg, np.ndarray) or type(msg).__name__ == "array":
        return [v.item() if hasattr(v, "item") else v for v in msg]
    if isinstance(msg, (bytes, bytearray)):
        return list(msg)
    return msg


def from_dict(cls: type, data: dict) -> Any:
    """Message of type ``cls`` filled from a nested dict (unknown fields raise ValueError)."""
    msg = cls()
    fields = msg.get_fields_and_field_types()
    for key, value in data.items():
        if key not in fields:
            raise ValueError(f"{cls.__name__} has no field '{key}'; fields: {sorted(fields)}")
        current = getattr(msg, key)
        if hasattr(current, "get_fields_and_field_types"):
            setattr(msg, key, from_dict(type(current), value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            slot = msg.SLOT_TYPES[list(fields).index(key)]
            inner = slot.value_type
            element_cls = getattr(importlib.import_module(".".join(inner.namespaces)), inner.name)
            setattr(msg, key, [from_dict(element_cls, v) for v in value])
        else:
            setattr(msg, key, value)
    return msg
