"""Simulated robots behind one backend interface: kinematic biped, scripted wheels, MuJoCo (optional).

:func:`create_backend` builds a backend by name; a backend whose module is not installed (MuJoCo,
added later as ``walk_mpc.core.sim.mujoco``) is imported lazily and reported with a clear
:class:`~walk_mpc.core.errors.ConfigError`. The MuJoCo module must define
``create_backend(params: KinematicSim.Parameters) -> SimBackend``, so it shares the robot, hardware
period, sole geometry, noise and initial posture of the kinematic plant's parameters.
"""

from __future__ import annotations

import importlib

from walk_mpc.core.errors import ConfigError
from walk_mpc.core.sim.backend import (
    GRAVITY,
    JointServo,
    JointTrajectoryCommand,
    SensorSample,
    SimBackend,
    SimState,
)

#: Backends selectable by name, and the module that implements each one.
BACKENDS = {"kinematic": "walk_mpc.core.sim.kinematic", "mujoco": "walk_mpc.core.sim.mujoco"}


def create_backend(name: str, params=None) -> SimBackend:
    """The legged-robot backend ``name`` with the kinematic plant's parameters ``params``.

    Args:
        name: ``"kinematic"`` or ``"mujoco"``.
        params: :class:`~walk_mpc.core.sim.kinematic.KinematicSim.Parameters` (None = defaults).

    Raises:
        ConfigError: Unknown backend name, or its module is not available.
        ModelError: The robot cannot be simulated by this backend.
    """
    if name not in BACKENDS:
        raise ConfigError(f"unknown simulator backend {name!r}; backends: {sorted(BACKENDS)}", "backend")
    try:
        module = importlib.import_module(BACKENDS[name])
    except ModuleNotFoundError as exc:
        if exc.name is not None and BACKENDS[name].startswith(exc.name):
            raise ConfigError(f"simulator backend {name!r} is not available yet: module "
                              f"{BACKENDS[name]} is missing", "backend") from exc
        raise ConfigError(f"simulator backend {name!r} cannot be imported: {exc}", "backend") from exc
    if name == "kinematic":
        return module.KinematicSim(params)
    factory = getattr(module, "create_backend", None)
    if factory is None:
        raise ConfigError(f"module {BACKENDS[name]} defines no create_backend(params)", "backend")
    if params is None:
        from walk_mpc.core.sim.kinematic import KinematicSim

        params = KinematicSim.Parameters()
    return factory(params)


__all__ = [
    "BACKENDS",
    "GRAVITY",
    "JointServo",
    "JointTrajectoryCommand",
    "SensorSample",
    "SimBackend",
    "SimState",
    "create_backend",
]
