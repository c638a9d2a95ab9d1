"""The walking pattern generator: LIPM model predictive control of the CoM over the footstep plan (seed 001).

Modules:
    lipm: :class:`LipmModel`, the linear inverted pendulum (state: CoM position, velocity, acceleration).
    preview: :class:`Preview` and :class:`PreviewBuilder`, the support regions over the horizon.
    problem: :class:`Mpc`, :class:`MpcParameters` and :class:`Plan`, the QP over the preview.
    status: :class:`PlanStatus`, the outcome of a solve.
    exact, exact_kernel: the exact active-set backend (numba kernel when available).
    daqp_backend, osqp_backend: the DAQP and OSQP backends.
    planner: :class:`MpcPlanner` and :class:`PlannerParameters`: one control tick with CoM feedback.
    support_correction: :class:`SupportCorrector`, seed 001's support-foot correction at lift-off.
"""
