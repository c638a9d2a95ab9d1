"""Exception tree of walk_mpc: every error a user can cause derives from WalkMpcError.

Policy (as in qpsolvers): errors raised by third-party libraries (osqp, daqp,
pinocchio, yaml) are caught at the boundary of the component that calls them and
re-raised as one of the classes below, chained with ``raise ... from exc``, so a
caller only ever needs to catch :class:`WalkMpcError`. Each class carries the
offending value(s) as attributes and its message says what was expected.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


class WalkMpcError(Exception):
    """Base class of every error raised by walk_mpc."""


class ParameterError(WalkMpcError, ValueError):
    """A parameter value is out of its domain.

    Attributes:
        name: Parameter name (dotted path for nested parameters).
        value: The rejected value.
        expected: Human-readable description of the valid domain.
    """

    def __init__(self, name: str, value: Any, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"parameter '{name}' = {value!r} is invalid: expected {expected}")


class ConfigError(WalkMpcError, ValueError):
    """A configuration file or mapping is malformed (unknown key, missing key, bad type).

    Attributes:
        key: Dotted path of the offending key ('' for the whole document).
        source: Where the configuration came from (file path or description).
    """

    def __init__(self, message: str, key: str = "", source: str = "") -> None:
        self.key = key
        self.source = source
        where = f" in {source}" if source else ""
        at = f" at '{key}'" if key else ""
        super().__init__(f"configuration error{where}{at}: {message}")


class UnknownKeyError(ConfigError):
    """A configuration mapping holds a key that no parameter has."""

    def __init__(self, key: str, valid: Iterable[str], source: str = "") -> None:
        self.valid = sorted(valid)
        super().__init__(
            f"unknown key; valid keys here are {self.valid}", key=key, source=source
        )


class InputError(WalkMpcError, ValueError):
    """A run-time input (sample, state vector, message field) is malformed.

    Attributes:
        name: Name of the input.
        value: The rejected value (may be abbreviated).
        expected: What was expected (shape, finiteness, range).
    """

    def __init__(self, name: str, value: Any, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"input '{name}' = {value!r} is invalid: expected {expected}")


class ShapeError(InputError):
    """An array has the wrong shape."""

    def __init__(self, name: str, shape: Sequence[int], expected: Sequence[int] | str) -> None:
        want = expected if isinstance(expected, str) else tuple(expected)
        super().__init__(name, tuple(shape), f"shape {want}")


class InvalidStepError(WalkMpcError, ValueError):
    """A footstep is malformed or violates the walk contract.

    Attributes:
        step_index: Index of the offending step (-1 when unknown).
        reason: What is wrong with it.
    """

    def __init__(self, step_index: int, reason: str) -> None:
        self.step_index = step_index
        self.reason = reason
        super().__init__(f"step {step_index}: {reason}")


class InconsistentStepsError(InvalidStepError):
    """Two consecutive steps use the same foot.

    Attributes:
        first_index: Index of the first of the two steps.
        second_index: Index of the second of the two steps.
    """

    def __init__(self, first_index: int, second_index: int, foot: int) -> None:
        self.first_index = first_index
        self.second_index = second_index
        self.foot = foot
        super().__init__(
            second_index,
            f"steps {first_index} and {second_index} both use foot {foot}; "
            "expected alternating feet",
        )


class SolverError(WalkMpcError):
    """A numerical solver failed (wraps the third-party error, if any)."""


class InfeasibleProblemError(SolverError):
    """A QP has no solution satisfying its constraints."""


class ModelError(WalkMpcError):
    """A robot model could not be loaded or is inconsistent with the configuration."""


class FrameNotFound(ModelError, KeyError):
    """A frame name is not in the robot model.

    Attributes:
        name: The unknown frame name.
        frames: The valid frame names.
        context: Where the name came from and what it should be ('' = not said).
    """

    def __init__(self, name: str, frames: Iterable[str], context: str = "") -> None:
        self.name = name
        self.frames = list(frames)
        self.context = context
        what = f" ({context})" if context else ""
        super().__init__(f"frame '{name}'{what} not found in the robot model; valid frames: {self.frames}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class JointNotFound(ModelError, KeyError):
    """A joint name is not in the robot model.

    Attributes:
        name: The unknown joint name.
        joints: The valid joint names.
    """

    def __init__(self, name: str, joints: Iterable[str]) -> None:
        self.name = name
        self.joints = list(joints)
        super().__init__(f"joint '{name}' not found in the robot model; valid joints: {self.joints}")

    def __str__(self) -> str:
        return self.args[0]


class IKError(WalkMpcError):
    """Inverse kinematics did not reach its targets within tolerance."""
