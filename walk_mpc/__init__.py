"""walk_mpc: footstep-queue walking for legged robots (MPC, IK, wheel contact) with ROS 2 nodes.

The algorithms live in :mod:`walk_mpc.core` and import no ROS module; the ROS 2
adapters live in :mod:`walk_mpc.nodes`.
"""

__version__ = "0.1.0"
