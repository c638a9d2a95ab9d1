"""The robot's body: model, state estimation, whole-body IK and its targets, swing feet, gestures.

Modules:
    robot: :class:`RobotModel`, pinocchio model with sole frames, CoM and kinematics.
    state_estimation: :func:`estimate_state`, the measured CoM and soles of a sensor sample.
    ik, ik_kernel: :class:`IKSolver`, damped Gauss-Newton whole-body IK (solved twice per tick, seed 001).
    targets: IK targets of a walk (:func:`walk_targets`) and of standing (:class:`StandingTargets`).
    swing: swing-foot trajectories.
    gesture: :class:`GestureController`, seed 003's gesture functions.
"""
