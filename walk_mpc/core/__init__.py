"""Algorithms of walk_mpc as plain Python over numpy/scipy/osqp/pinocchio (never rclpy)."""

from walk_mpc.core.errors import (  # noqa: F401
    ConfigError,
    FrameNotFound,
    IKError,
    InconsistentStepsError,
    InfeasibleProblemError,
    InputError,
    InvalidStepError,
    JointNotFound,
    ModelError,
    ParameterError,
    ShapeError,
    SolverError,
    UnknownKeyError,
    WalkMpcError,
)
from walk_mpc.core.walk.step import Foot, Step  # noqa: F401
