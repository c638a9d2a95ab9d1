"""Entry point of a walk_mpc node process: its DDS participant first, then the node's modules (issue 17).

    python -P -m walk_mpc.nodes.start ik --ros-args -r __node:=ik --params-file config/walk_mpc.yaml

Only rclpy is imported before the participant exists
(:func:`~walk_mpc.nodes._common.start_participant`); the node's module (its robot model, scipy, pinocchio,
numba kernels) then loads while DDS discovers the new participant, and its ``main`` builds the node on that
participant. The garbage collector is off until the node is built (``_common.freeze_startup_objects``).
The installed executables (``ros2 run walk_mpc ik``) and ``launch_graph`` start the nodes so;
``python -m walk_mpc.nodes.ik`` still works, with discovery after the imports.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Optional, Sequence

import rclpy

from walk_mpc.nodes._common import start_participant

#: The nodes started so (each module's ``main(args)`` runs its node through ``_common.run``).
NODES = ("walk_behavior", "mpc_planner", "ik", "wheel_contact", "sim", "robot_state")


def main(node: Optional[str] = None, argv: Optional[Sequence[str]] = None) -> int:
    """Run node ``node`` (else the first argument of ``argv``, default ``sys.argv``) until shutdown.

    Returns:
        The node's exit code (2 on a configuration error, or an unknown node name).
    """
    argv = list(sys.argv if argv is None else argv)
    if node is None:
        if len(argv) < 2 or argv[1] not in NODES:
            print(f"usage: python -m walk_mpc.nodes.start {{{','.join(NODES)}}} [--ros-args ...]",
                  file=sys.stderr)
            return 2
        node = argv.pop(1)
    elif node not in NODES:
        print(f"[walk_mpc] no node '{node}'; nodes: {list(NODES)}", file=sys.stderr)
        return 2
    gc.disable()  # no collections during the imports and the construction: _common.freeze_startup_objects
    start_participant(node, argv)
    try:
        module = importlib.import_module(f"walk_mpc.nodes.{node}")
    except BaseException:
        rclpy.try_shutdown()
        raise
    return module.main(argv)


if __name__ == "__main__":
    sys.exit(main())
