"""Touchdowns seen in the contact forces: a walk succeeds only when its steps were measured.

The walk behavior completes steps by the clock (Atlas semantics: ``current_step_index`` advances at each
planned touchdown). That says nothing about the robot: a frozen whole-body controller leaves it standing
on one foot while the clock completes every step. :class:`LandingMonitor` watches what a real robot
measures, the sole contact forces (HAPTIX ``hxSensor`` contact sensors, summed per foot by name prefix):

* a foot *carries weight* when its share of the total normal force exceeds ``load_fraction`` (a relative
  threshold: the same for a 35 kg and a 95 kg robot); below ``min_total_force`` in total nothing is decided
  (robot in the air, sensors off);
* a step *lifted off* when its foot was seen unloaded during the step's single support;
* it *landed* when that foot carries weight again after it lifted: in the second half of its swing
  (``early_progress`` of the single support on) an *early* landing, else during the next double support (or
  the catch), a *late* one when it was not loaded at the first sample of that phase, or, later still, in
  the next single support, whose stance foot it is (seen on MuJoCo: a robot leaning on its stance foot loads
  the landed one only as the double support ends); the first such sample is the touchdown, and
  :meth:`LandingMonitor.touchdown_delay` its time minus the planned one (the end of
  the single support: negative early, positive late);
* with measured feet (forward kinematics of the sample), its landing is *measured* ``settle_time`` after the
  touchdown: the horizontal distance of the sole to its step must be within ``tolerance``.

:meth:`LandingMonitor.problems` lists what was not seen for a walk's steps; the supervisor turns a normal
end with problems into LANDING_NOT_MEASURED.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_positive
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Phase, PhaseKind


@dataclasses.dataclass(frozen=True)
class LandingParameters:
    """Parameters of :class:`LandingMonitor`.

    Attributes:
        enabled: Check the landings (False: the clock alone completes the walk, as before).
        contact_prefixes: Name prefix of the (left, right) sole contact sensors in the samples.
        load_fraction: Share of the total normal force above which a foot carries weight [-].
        min_total_force: Total normal force [N] below which no contact is decided.
        tolerance: Largest horizontal distance [m] of a landed sole to its step.
        settle_time: Time after the touchdown at which the landed sole is measured [s].
        early_progress: Fraction of the swing [-] from which a lifted foot carrying weight again has landed
            (early).
    """

    enabled: bool = True
    contact_prefixes: tuple = ("left_foot", "right_foot")
    load_fraction: float = 0.1
    min_total_force: float = 20.0
    tolerance: float = 0.03
    settle_time: float = 0.1
    early_progress: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ParameterError("enabled", self.enabled, "true or false")
        object.__setattr__(self, "contact_prefixes", tuple(self.contact_prefixes))
        prefixes = self.contact_prefixes
        if len(prefixes) != 2 or not all(isinstance(p, str) and p for p in prefixes):
            raise ParameterError("contact_prefixes", prefixes, "(left, right) sensor name prefixes")
        if not 0.0 < self.load_fraction < 0.5:
            raise ParameterError("load_fraction", self.load_fraction, "a share in (0, 0.5)")
        check_positive("min_total_force", self.min_total_force)
        check_positive("tolerance", self.tolerance)
        check_positive("settle_time", self.settle_time)
        if not 0.0 < self.early_progress <= 1.0:
            raise ParameterError("early_progress", self.early_progress, "a fraction of the swing in (0, 1]")


@dataclasses.dataclass
class _Step:
    foot: Foot
    target: tuple  # planned (x, y) of the sole
    lifted: bool = False
    touchdown: Optional[float] = None  # time of the touchdown [s]
    planned: float = math.nan  # planned touchdown [s] (end of the single support)
    error: Optional[float] = None  # measured horizontal landing error [m]


class LandingMonitor:
    """Lift-offs, touchdowns and landing errors of a walk's steps from the contact forces (module doc)."""

    Parameters = LandingParameters

    def __init__(self, params: Optional[LandingParameters] = None) -> None:
        self.params = params if params is not None else LandingParameters()
        self._layouts: dict = {}
        self.reset()

    def reset(self) -> None:
        """Forget every step (a new walk)."""
        self._steps: dict[int, _Step] = {}
        self.sensors_seen = False

    def loads(self, sample: SensorSample) -> Optional[dict]:
        """Foot -> whether it carries weight in ``sample``; None without contact sensors or total force."""
        layout = self._layouts.get(sample.contact_names)
        if layout is None:
            layout = tuple(np.array([name.startswith(prefix) for name in sample.contact_names], dtype=bool)
                           for prefix in self.params.contact_prefixes)
            self._layouts[sample.contact_names] = layout
        if not all(mask.any() for mask in layout):
            return None
        self.sensors_seen = True
        forces = [float(np.sum(sample.contact[mask])) for mask in layout]
        total = forces[0] + forces[1]
        if not math.isfinite(total) or total < self.params.min_total_force:
            return None
        share = self.params.load_fraction * total
        return {Foot.LEFT: forces[0] > share, Foot.RIGHT: forces[1] > share}

    def observe(self, t: float, phase: Phase, loads: Optional[dict],
                measured_feet: Optional[dict] = None) -> None:
        """One sample at walk time ``t`` [s] in ``phase`` of the walk's timeline.

        Args:
            t: Time of the sample on the timeline [s].
            phase: The timeline's phase at ``t``.
            loads: :meth:`loads` of the sample (computed once per sample by the caller).
            measured_feet: Foot -> measured sole pose of this sample, if measured.
        """
        if not self.params.enabled:
            return
        if phase.kind is PhaseKind.SINGLE:
            previous = self._steps.get(phase.step_index - 1)
            if (previous is not None and previous.lifted and previous.touchdown is None and loads is not None
                    and loads[previous.foot]):
                previous.touchdown = t  # late: the stance foot of this single support carries weight
            if previous is not None and previous.touchdown is not None:
                self._measure(previous, t, measured_feet)
            step = self._steps.get(phase.step_index)
            if step is None:
                target = phase.foot(phase.swing_foot).position
                step = self._steps[phase.step_index] = _Step(phase.swing_foot, (target[0], target[1]),
                                                             planned=phase.t_end)
            if loads is not None and not loads[step.foot]:
                step.lifted = True
            elif (loads is not None and step.lifted and step.touchdown is None
                  and phase.progress(t) >= self.params.early_progress):
                step.touchdown = t  # an early landing
            return
        if phase.kind not in (PhaseKind.DOUBLE, PhaseKind.CATCH, PhaseKind.STAND):
            return
        step = self._steps.get(phase.step_index)
        if step is None or not step.lifted:
            return
        if step.touchdown is None:
            if loads is not None and loads[step.foot]:
                step.touchdown = t
            return
        self._measure(step, t, measured_feet)

    def _measure(self, step: _Step, t: float, measured_feet: Optional[dict]) -> None:
        """The landing error of a landed step ``settle_time`` after its touchdown (once)."""
        if step.error is None and measured_feet is not None and t - step.touchdown >= self.params.settle_time:
            pose: FootPose = measured_feet[step.foot]
            step.error = math.hypot(pose.position[0] - step.target[0], pose.position[1] - step.target[1])

    def problems(self, step_indices) -> list[str]:
        """What was not measured for the steps ``step_indices`` (empty: every step lifted off, landed and,
        where measured, within tolerance). No contact sensor ever seen: one problem saying so."""
        if not self.params.enabled:
            return []
        if not self.sensors_seen:
            prefixes = "/".join(self.params.contact_prefixes)
            return [f"no contact sensors named {prefixes}* in the samples: no touchdown measured"]
        out = []
        missing = [k for k in step_indices if k not in self._steps or not self._steps[k].lifted]
        if missing:
            out.append(f"no lift-off seen in the contact forces for steps {missing}")
        unlanded = [k for k in step_indices if k in self._steps and self._steps[k].lifted
                    and self._steps[k].touchdown is None]
        if unlanded:
            out.append(f"no touchdown seen in the contact forces for steps {unlanded}")
        tol = self.params.tolerance
        far = [(k, self._steps[k].error) for k in step_indices if k in self._steps
               and self._steps[k].error is not None and self._steps[k].error > tol]
        if far:
            out.append(f"landed beyond tolerance ({tol:.3f} m): "
                       + ", ".join(f"step {k} {error:.3f} m" for k, error in far))
        return out

    def touchdown(self, step_index: int) -> Optional[float]:
        """Time [s] the step's touchdown was seen, or None."""
        step = self._steps.get(step_index)
        return None if step is None else step.touchdown

    def touchdown_delay(self, step_index: int) -> Optional[float]:
        """Measured minus planned touchdown time [s] of a step (negative: early), or None if not seen."""
        step = self._steps.get(step_index)
        if step is None or step.touchdown is None or math.isnan(step.planned):
            return None
        return step.touchdown - step.planned

    def landing_error(self, step_index: int) -> Optional[float]:
        """Measured horizontal landing error [m] of a step, or None."""
        step = self._steps.get(step_index)
        return None if step is None else step.error


__all__ = ["LandingMonitor", "LandingParameters"]
