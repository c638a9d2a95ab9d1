"""Wheel contact observer: is a wheel on the floor, from its measured torque and velocity?

Port of upkie's ``WheelContact`` observer (upkie/upkie ``upkie/cpp/observers/WheelContact.cpp``) as
its code behaves, plus a hardened input path and an optional regression estimator.

Physics: a wheel on the floor drives the robot, so a given acceleration needs a large torque (large
apparent inertia ``I = |torque| / |acceleration|``); a wheel in the air spins up with little torque
(apparent inertia close to the wheel's own, about 1e-4 kg m^2). Contact is therefore detected when
the apparent inertia rises above ``touchdown_inertia`` and lost when it drops below
``liftoff_inertia`` (hysteresis: in between, the contact state is kept).

Two estimators of the apparent inertia:

* ``"ratio"`` (default, upkie's code, reproduced operation by operation so that outputs match the
  C++ to the last bit): inertia = filtered ``|torque|`` / (filtered ``|acceleration|`` + 1e-4).
* ``"regression"`` (what upkie's documentation describes): online least squares of ``|torque|``
  on ``|acceleration|`` without affine term, with exponential forgetting at ``cutoff_period``
  (``Sxy = lpf(|torque| |acceleration|)``, ``Sxx = lpf(acceleration^2)``, slope
  ``Sxy / (Sxx + 1e-8)``). Its acceleration is the derivative of velocity low-pass filtered with
  the shorter ``regression_velocity_period``. The slope then goes through a *min-passthrough*:
  drops pass through instantly, rises are low-pass filtered with ``regression_rise_period``.
  Lift-off makes the apparent inertia DROP, so the fast path is the one for drops (upkie's prose
  says "max-passthrough" because it describes the reciprocal convention, where inertia is low in
  contact); the slow rise keeps a freed wheel from flickering back into contact. Squared
  accelerations weigh the regression, so the large accelerations of a freed wheel dominate it
  within a few tens of milliseconds, where the ratio of two averages waits for the torque average
  to decay (about 5x sooner on the simulated lift-offs of the tests). The price of that
  weighting: after a flight with large wheel accelerations, the regression remembers the flight
  longer and confirms touchdown later (about 1.6 s against 0.7 s on the simulated flights).

Both estimators keep upkie's gating: while not in contact, no decision is made when the filtered
absolute acceleration or torque is below its touchdown minimum (inertia and contact keep their
values).

Error policy: ``observe`` never raises and never aborts. A sample with a non-finite torque or
velocity, a ``dt`` that is not finite and > 0, or a ``dt`` too long for a filter period
(period <= 2 dt) is rejected: the state is left untouched, :attr:`WheelContact.rejected_samples`
increases, :attr:`WheelContact.last_rejection` says why and ``observe`` returns False. Call
:meth:`WheelContact.Parameters.check_dt` beforehand to get a :class:`ParameterError` instead.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_choice, check_less, check_nonnegative, check_positive

#: Estimators of the apparent inertia, for ``WheelContact.Parameters.estimator``.
ESTIMATORS = ("ratio", "regression")

#: Regularization of the ratio estimator's denominator [rad/s^2] (upkie's constant).
RATIO_EPSILON = 1e-4

#: Regularization of the regression estimator's denominator [rad^2/s^4] (``RATIO_EPSILON ** 2``).
REGRESSION_EPSILON = 1e-8


def _lpf(prev: float, period: float, value: float, dt: float) -> float:
    """First-order low-pass filter step, in the operation order of upkie's ``low_pass_filter``."""
    alpha = dt / period
    return prev + alpha * (value - prev)


class WheelContact:
    """Observe contact between one wheel and the floor.

    Example:
        >>> observer = WheelContact(WheelContact.Parameters())
        >>> for torque, velocity in samples:  # doctest: +SKIP
        ...     observer.observe(torque, velocity, dt=1e-3)
        >>> observer.contact  # doctest: +SKIP
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Observer parameters (upkie's spine defaults).

        Attributes:
            cutoff_period: Time constant of the low-pass filters on velocity, absolute acceleration
                and absolute torque (and the regression's forgetting) [s].
            liftoff_inertia: Contact becomes false when the apparent inertia drops below this
                [kg m^2].
            min_touchdown_acceleration: While not in contact, no decision is made if the filtered
                absolute acceleration is below this [rad/s^2].
            min_touchdown_torque: While not in contact, no decision is made if the filtered absolute
                torque is below this [N m].
            touchdown_inertia: Contact becomes true when the apparent inertia rises above this
                [kg m^2].
            estimator: ``"ratio"`` (upkie's code) or ``"regression"`` (see the module docstring).
            regression_velocity_period: Time constant of the low-pass filter on velocity whose
                derivative feeds the regression estimator [s]. Shorter than ``cutoff_period`` so that
                the acceleration of a freed wheel shows up within a few tens of milliseconds; the
                price is more velocity noise in the regression (about ``velocity noise / period``
                rad/s^2). Unused by ``"ratio"``.
            regression_rise_period: Time constant of the min-passthrough filter of the regression
                estimator: rises of the estimated inertia are low-pass filtered with it, drops pass
                through instantly [s]. Unused by ``"ratio"``.
        """

        cutoff_period: float = 0.2
        liftoff_inertia: float = 0.001
        min_touchdown_acceleration: float = 2.0
        min_touchdown_torque: float = 0.015
        touchdown_inertia: float = 0.004
        estimator: str = "ratio"
        regression_velocity_period: float = 0.05
        regression_rise_period: float = 0.05

        def __post_init__(self) -> None:
            check_positive("cutoff_period", self.cutoff_period)
            check_positive("liftoff_inertia", self.liftoff_inertia)
            check_positive("touchdown_inertia", self.touchdown_inertia)
            check_less("liftoff_inertia", self.liftoff_inertia, "touchdown_inertia", self.touchdown_inertia)
            check_nonnegative("min_touchdown_acceleration", self.min_touchdown_acceleration)
            check_nonnegative("min_touchdown_torque", self.min_touchdown_torque)
            check_choice("estimator", self.estimator, ESTIMATORS)
            check_positive("regression_velocity_period", self.regression_velocity_period)
            check_positive("regression_rise_period", self.regression_rise_period)

        def _dt_problem(self, dt: float) -> tuple[str, float, str] | None:
            """Why ``dt`` cannot be used with these parameters, or None if it can.

            Returns:
                None, or ``(name, value, expected)`` for the offending quantity.
            """
            if not _is_real(dt) or not dt > 0.0 or not math.isfinite(dt):
                return ("dt", dt, "a finite number > 0 [s]")
            if self.cutoff_period <= 2.0 * dt:
                return ("cutoff_period", self.cutoff_period, f"> 2 * dt = {2.0 * dt!r} s")
            if self.estimator == "regression":
                for name in ("regression_velocity_period", "regression_rise_period"):
                    if getattr(self, name) <= 2.0 * dt:
                        return (name, getattr(self, name), f"> 2 * dt = {2.0 * dt!r} s")
            return None

        def check_dt(self, dt: float) -> None:
            """Raise if ``dt`` cannot be used with these parameters.

            Args:
                dt: Sampling period [s].

            Raises:
                ParameterError: If ``dt`` is not finite and > 0, or if a filter period is not
                    larger than ``2 * dt`` (the condition under which ``observe`` rejects samples).
            """
            problem = self._dt_problem(dt)
            if problem is not None:
                raise ParameterError(*problem)

    def __init__(self, params: WheelContact.Parameters | None = None) -> None:
        """Initialize the observer, out of contact with all filters at zero.

        Args:
            params: Observer parameters (defaults when None).
        """
        if params is None:
            params = WheelContact.Parameters()
        if not isinstance(params, WheelContact.Parameters):
            raise ParameterError("params", params, "a WheelContact.Parameters")
        self._params = params
        self._regression = params.estimator == "regression"
        self.reset()

    @property
    def params(self) -> WheelContact.Parameters:
        """Observer parameters."""
        return self._params

    @property
    def contact(self) -> bool:
        """Current contact state."""
        return self._contact

    @property
    def inertia(self) -> float:
        """Apparent inertia at the wheel at the last decision [kg m^2] (0 before the first one)."""
        return self._inertia

    @property
    def abs_torque(self) -> float:
        """Low-pass filtered absolute wheel torque [N m]."""
        return self._abs_torque

    @property
    def abs_acceleration(self) -> float:
        """Low-pass filtered absolute wheel acceleration [rad/s^2]."""
        return self._abs_acceleration

    @property
    def rejected_samples(self) -> int:
        """Number of samples rejected by :meth:`observe` since construction or :meth:`reset`."""
        return self._rejected_samples

    @property
    def last_rejection(self) -> str | None:
        """Reason of the latest rejected sample since construction or :meth:`reset`, None if none.

        It is not cleared by later accepted samples; the return value of :meth:`observe` tells
        whether the latest sample was used.
        """
        return self._last_rejection

    def reset(self) -> None:
        """Return to the initial state: out of contact, filters and inertia at zero, no rejections."""
        self._velocity = 0.0
        self._abs_acceleration = 0.0
        self._abs_torque = 0.0
        self._inertia = 0.0
        self._contact = False
        self._regression_velocity = 0.0
        self._sxy = 0.0
        self._sxx = 0.0
        self._decided = False
        self._rejected_samples = 0
        self._last_rejection: str | None = None

    def reset_contact(self) -> None:
        """Set contact to false, leaving filters and inertia untouched (as upkie does)."""
        self._contact = False

    def observe(self, torque: float, velocity: float, dt: float) -> bool:
        """Process a new observation.

        Args:
            torque: Measured wheel torque [N m].
            velocity: Measured wheel velocity [rad/s].
            dt: Duration since the previous observation [s].

        Returns:
            True if the sample was used, False if it was rejected (state untouched; see
            :attr:`last_rejection`).
        """
        reason = self._rejection_reason(torque, velocity, dt)
        if reason is not None:
            self._rejected_samples += 1
            self._last_rejection = reason
            return False
        params = self._params
        period = params.cutoff_period

        # Steps 1-4 of upkie's observe, in its exact operation order.
        prev_velocity = self._velocity
        self._velocity = _lpf(prev_velocity, period, velocity, dt)
        acceleration = (self._velocity - prev_velocity) / dt
        self._abs_acceleration = _lpf(self._abs_acceleration, period, abs(acceleration), dt)
        self._abs_torque = _lpf(self._abs_torque, period, abs(torque), dt)
        if self._regression:
            prev_velocity = self._regression_velocity
            self._regression_velocity = _lpf(prev_velocity, params.regression_velocity_period, velocity, dt)
            fast_acceleration = (self._regression_velocity - prev_velocity) / dt
            self._sxy = _lpf(self._sxy, period, abs(torque) * abs(fast_acceleration), dt)
            self._sxx = _lpf(self._sxx, period, fast_acceleration * fast_acceleration, dt)

        # Step 5: no decision on weak signals while not in contact.
        if not self._contact and (
            self._abs_acceleration < params.min_touchdown_acceleration
            or self._abs_torque < params.min_touchdown_torque
        ):
            return True

        # Step 6: apparent inertia.
        if self._regression:
            slope = self._sxy / (self._sxx + REGRESSION_EPSILON)
            if not self._decided or slope <= self._inertia:
                self._inertia = slope  # drops pass through: fast lift-off
            else:
                self._inertia = _lpf(self._inertia, params.regression_rise_period, slope, dt)
            self._decided = True
        else:
            self._inertia = self._abs_torque / (self._abs_acceleration + RATIO_EPSILON)

        # Step 7: hysteresis (strict comparisons, state kept in between).
        if self._inertia < params.liftoff_inertia:
            self._contact = False
        elif self._inertia > params.touchdown_inertia:
            self._contact = True
        return True

    def _rejection_reason(self, torque: float, velocity: float, dt: float) -> str | None:
        """Why a sample cannot be used, or None if it can."""
        if not _is_real(torque) or not math.isfinite(torque):
            return f"torque = {torque!r} N m is not a finite number"
        if not _is_real(velocity) or not math.isfinite(velocity):
            return f"velocity = {velocity!r} rad/s is not a finite number"
        problem = self._params._dt_problem(dt)
        if problem is not None:
            name, value, expected = problem
            if name == "dt":
                return f"dt = {dt!r} s is not {expected}"
            return f"{name} = {value!r} s is too short for dt = {dt!r} s: expected {expected}"
        return None

    def __repr__(self) -> str:
        return (
            f"WheelContact(contact={self._contact}, inertia={self._inertia:.6g}, "
            f"abs_torque={self._abs_torque:.6g}, abs_acceleration={self._abs_acceleration:.6g}, "
            f"estimator={self._params.estimator!r})"
        )


def _is_real(value: object) -> bool:
    """True for real numbers (Python and numpy), excluding bools."""
    if type(value) is float:
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
