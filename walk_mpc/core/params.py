"""Validated parameter dataclasses: checks, YAML/ROS mappings, and flattening to dotted names.

Every component's ``Parameters`` is a frozen dataclass whose ``__post_init__``
calls the ``check_*`` helpers below. The same dataclasses are filled from
``config/*.yaml`` (:func:`from_mapping`, unknown keys rejected) and declared as
ROS parameters (:func:`flatten` of :func:`to_mapping`), so YAML, ROS parameters
and code cannot drift.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

from walk_mpc.core.errors import ConfigError, ParameterError, UnknownKeyError

T = TypeVar("T")


def check_finite(name: str, value: float) -> None:
    """Raise ParameterError unless ``value`` is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParameterError(name, value, "a finite number")


def check_positive(name: str, value: float) -> None:
    """Raise ParameterError unless ``value`` is finite and > 0."""
    check_finite(name, value)
    if value <= 0.0:
        raise ParameterError(name, value, "a finite number > 0")


def check_nonnegative(name: str, value: float) -> None:
    """Raise ParameterError unless ``value`` is finite and >= 0."""
    check_finite(name, value)
    if value < 0.0:
        raise ParameterError(name, value, "a finite number >= 0")


def check_range(name: str, value: float, low: float, high: float) -> None:
    """Raise ParameterError unless ``low <= value <= high``."""
    check_finite(name, value)
    if not low <= value <= high:
        raise ParameterError(name, value, f"a number in [{low}, {high}]")


def check_int_range(name: str, value: int, low: int, high: int | None = None) -> None:
    """Raise ParameterError unless ``value`` is an int with ``low <= value (<= high)``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(name, value, "an integer")
    if value < low or (high is not None and value > high):
        raise ParameterError(name, value, f"an integer in [{low}, {high if high is not None else 'inf'}]")


def check_less(name_low: str, low: float, name_high: str, high: float) -> None:
    """Raise ParameterError unless ``low < high``."""
    if not low < high:
        raise ParameterError(name_low, low, f"less than {name_high} = {high!r}")


def check_choice(name: str, value: Any, choices: typing.Iterable[Any]) -> None:
    """Raise ParameterError unless ``value`` is one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ParameterError(name, value, f"one of {choices}")


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(tp: Any, value: Any, key: str, source: str) -> Any:
    """Convert a YAML/ROS value to the annotated field type (ints to floats, lists to tuples)."""
    origin = typing.get_origin(tp)
    if _is_dataclass_type(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected a mapping for {tp.__name__}, got {value!r}", key, source)
        return from_mapping(tp, value, source=source, prefix=key)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"expected a number, got {value!r}", key, source)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"expected an integer, got {value!r}", key, source)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {value!r}", key, source)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}", key, source)
        return value
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"expected a list, got {value!r}", key, source)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v, f"{key}[{i}]", source) for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"expected a list of {len(args)} items, got {len(value)}", key, source)
        return tuple(_coerce(a, v, f"{key}[{i}]", source) for i, (a, v) in enumerate(zip(args, value)))
    return value


def from_mapping(cls: type[T], mapping: Mapping[str, Any], source: str = "", prefix: str = "") -> T:
    """Build the dataclass ``cls`` from a (possibly nested) mapping.

    Keys absent from ``mapping`` take the field's default; a field without a
    default must be present. Unknown keys raise :class:`UnknownKeyError`.
    Values are converted to the annotated types; the dataclass's own
    ``__post_init__`` then checks their domains.

    Args:
        cls: A dataclass type.
        mapping: Values by field name; nested dataclass fields take nested mappings.
        source: Where the mapping comes from, for error messages.
        prefix: Dotted path of this mapping inside the document, for error messages.

    Raises:
        ConfigError: On unknown or missing keys or values of the wrong type.
        ParameterError: When a value is outside its domain.
    """
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"expected a mapping, got {mapping!r}", prefix, source)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in mapping:
        if key not in fields:
            raise UnknownKeyError(f"{prefix}.{key}" if prefix else str(key), fields, source)
    kwargs = {}
    for name, field in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name in mapping:
            kwargs[name] = _coerce(hints[name], mapping[name], key, source)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError("missing required key", key, source)
    try:
        return cls(**kwargs)
    except ParameterError as exc:
        if prefix and not exc.name.startswith(prefix):
            raise ParameterError(f"{prefix}.{exc.name}", exc.value, exc.expected) from None
        raise


def to_mapping(instance: Any) -> dict[str, Any]:
    """Nested dict of a parameters dataclass (tuples become lists), the inverse of from_mapping."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(instance):
        if not field.init:
            continue
        value = getattr(instance, field.name)
        if dataclasses.is_dataclass(value):
            value = to_mapping(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif hasattr(value, "value") and isinstance(value.value, (int, str)):
            value = value.value  # enums
        out[field.name] = value
    return out


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten a nested mapping to dotted names, as ROS 2 does with nested YAML parameters."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten`."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML file into a dict, wrapping parse errors in ConfigError."""
    import yaml  # local import: only config loading needs PyYAML

    path = Path(path)
    try:
        with path.open(encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source=str(path)) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=str(path)) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(data).__name__}", source=str(path))
    return data


def node_section(document: Mapping[str, Any], node_name: str, source: str = "") -> dict[str, Any]:
    """Return the ``ros__parameters`` mapping of ``node_name`` in a ROS 2 parameters document.

    Raises:
        ConfigError: If the node or its ``ros__parameters`` key is missing.
    """
    if node_name not in document:
        raise ConfigError(f"no section for node '{node_name}'; sections: {sorted(document)}",
                          node_name, source)
    section = document[node_name]
    if not isinstance(section, Mapping) or "ros__parameters" not in section:
        raise ConfigError("expected a 'ros__parameters' mapping", node_name, source)
    return dict(section["ros__parameters"] or {})
