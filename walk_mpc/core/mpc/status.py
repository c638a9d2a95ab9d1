"""Outcome of an MPC solve, shared by the problem front end and its backends (no import cycle)."""

from __future__ import annotations

import enum


class PlanStatus(enum.Enum):
    """Outcome of an MPC solve."""

    SOLVED = "solved"
    INFEASIBLE = "infeasible"  # the support boxes admit no ZMP (e.g. lower > upper)
    FAILED = "failed"  # the solver did not converge or raised
    SHIFTED_PREVIOUS = "shifted_previous"  # a plan obtained by Plan.shifted(), no solve


__all__ = ["PlanStatus"]
