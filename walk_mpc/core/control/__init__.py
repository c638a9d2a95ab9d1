"""The control loop, written once: the controllers of every tick, shared by the nodes and the in-process loop.

Modules:
    closed_loop: :class:`ClosedLoopWalk`, the whole loop in one process on a simulator backend.
"""
