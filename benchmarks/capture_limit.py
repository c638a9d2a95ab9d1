"""Largest 0.1 s pushes a LIPM can capture under Talos' step limits, walking and standing (issue 18).

:mod:`walk_mpc.core.control.capturability` (N-step capture regions of the LIPM, rectangular soles, box step
limits, a double support after each touchdown) for the walk of ``benchmarks/robustness.py``'s walking pushes:
a 6-step 0.2 m walk, single / double support 0.8 / 0.3 s, the push in step 3's single support on the right
foot (the left foot swinging). Read from the configuration: the LIPM height (``config/walk_mpc.yaml``
``mpc_planner`` ``planner.mpc.com_height``), the walk's step limits (``walk_behavior`` ``behavior.limits``,
the :class:`~walk_mpc.core.walk.saturation.StepLimits` that step adjustment and recovery steps use too), the
double support (``behavior.timing.double_support_duration``), the soles (``config/robots/talos.yaml``
``sole``: the real sole, where the ZMP can go); the mass from the robot model. The nominal state at the push
is the walk's plan (:class:`~walk_mpc.core.mpc.planner.MpcPlanner`, the loop's parameters, open loop).

Cells: the largest impulse [N s] every smaller one of which is capturable in N steps ('-': the nominal state
itself needs a step), pushes at five times of the single support, (a) / (b):

* **(a) walk limits**: the swinging foot lands at its planned time; every later step the shortest the limits
  allow (``min_duration`` 0.4 s: the 0.3 s double support and a 0.1 s swing); its place anywhere within the
  step limits (no crossing).
* **(b) step adjustment + timing**: as (a), but the swinging foot may land at any time step timing
  (``StepAdjustmentParameters`` with ``adapt_timing``, defaults) allows: decided no sooner than the push's
  middle and ``min_swing_time`` after lift-off, no later than ``min_time_to_touchdown`` before the planned
  touchdown, landing ``shortest_time_to_touchdown`` after the decision at the earliest and at most
  ``max_lengthening`` of the time left later than planned. (The adjuster's own shift limits, by default
  forward, widening and narrowing 0, are a controller's choice, not applied: the envelope under them is
  smaller.)

The push is the exact 0.1 s constant force (its DCM shift as an impulse at its middle,
:func:`~walk_mpc.core.control.capturability.push_dcm_shift`). Standing rows: the 0-step limit of both soles
and the recovery steps (the first step by either foot, the push's middle taken as the decision: optimistic),
with the default recovery step timing and the quick one of the fifth session (sway 0.05 s, swing 0.25 s,
double support 0.1 s, ``max_backward`` 0.25 m, the crossover 0.15-0.3 m). Brisker gaits (0.2 m steps,
single / double support 0.7 / 0.2 ... 0.4 / 0.1 s; the push at the middle of step 3's single support, later
steps with that double support). Then, for each walking direction
below 40 N s with 3 steps (pushed at the start of the single support or at the benchmark's time, (a) and (b)),
what one limit alone would have to be for 40 N s.

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/capture_limit.py'
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # robustness' gait and push (with python -P)

import robustness  # noqa: E402

from walk_mpc.core.body.robot import RobotModel, load_robot_description  # noqa: E402
from walk_mpc.core.control.capturability import (  # noqa: E402
    CapturabilityParameters,
    dcm_of,
    largest_capturable_impulse,
    push_dcm_shift,
    standing_capture_region,
)
from walk_mpc.core.control.closed_loop import ClosedLoopParameters, default_planner_parameters  # noqa: E402
from walk_mpc.core.control.recovery_step import RecoveryStepParameters  # noqa: E402
from walk_mpc.core.control.step_adjustment import StepAdjustmentParameters  # noqa: E402
from walk_mpc.core.mpc.planner import MpcPlanner  # noqa: E402
from walk_mpc.core.mpc.problem import MpcParameters  # noqa: E402
from walk_mpc.core.params import from_mapping, load_yaml, node_section  # noqa: E402
from walk_mpc.core.walk.saturation import StepLimits  # noqa: E402
from walk_mpc.core.walk.timeline import PhaseKind  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = 40.0  # [N s] issue 18
#: Measured largest walking pushes [N s] (docs/balance.md, stabilizer on, state estimated): the best setting
#: and the default (no step adjustment).
MEASURED_WALKING = {"forward": (40.6, 31.2, "SA, timing, zmp_inward_offset 0.035, tip_angle 0.035"),
                    "backward": (40.6, 34.4, "SA, pelvis_level_gain 1"),
                    "outward": (31.2, 15.6, "SA, timing, zmp_inward_offset 0.035"),
                    "inward": (34.4, 28.1, "SA, timing")}
#: Measured standing pushes [N s]: without a step (stabilizer off) and the best with recovery steps.
#: Measured standing pushes [N s]: without a step (stabilizer off), with the default recovery steps (no
#: crossover: sideways the soles' limit), the best with recovery steps (quick steps, the crossover, 3 steps).
MEASURED_STANDING = {"forward": (28.1, 50.0, 68.8), "backward": (31.2, 46.9, 62.5),
                     "left": (43.8, 43.8, 62.5), "right": (43.8, 43.8, 65.6)}
#: Push middles [s] after the lift-off of step 3 (single support 0.8 s): start, the benchmark's (3.15-3.25 s),
#: late.
PHASES = (("start", 0.05), ("0.2 s", 0.2), ("middle (benchmark)", 0.4), ("0.6 s", 0.6), ("late", 0.75))


@dataclasses.dataclass(frozen=True)
class Setup:
    """What the analysis reads from the configuration and the robot model."""

    mass: float  # [kg]
    mpc: MpcParameters  # the planner's LIPM (CoM height, gravity)
    limits: StepLimits
    double_support: float  # [s]
    sole: tuple  # (front, back, left, right) [m]
    com: np.ndarray  # standing CoM (x, y) [m]
    feet: dict  # "left" / "right" -> sole (x, y) [m], standing

    @property
    def com_height(self) -> float:
        return self.mpc.com_height

    @property
    def omega(self) -> float:
        return self.mpc.model.omega

    def dcm_in(self, state: np.ndarray, stance: np.ndarray) -> np.ndarray:
        """The DCM (x, y) [m] of a planned CoM state (3, 2), relative to the stance sole's (x, y)."""
        return dcm_of(state[0], state[1], self.omega) - stance


def read_setup() -> Setup:
    """Talos: ``config/robots/talos.yaml``, ``config/walk_mpc.yaml`` and the robot model."""
    talos = load_robot_description(ROOT / "config" / "robots" / "talos.yaml")
    document = load_yaml(ROOT / "config" / "walk_mpc.yaml")
    behavior = node_section(document, "walk_behavior")["behavior"]
    limits = from_mapping(StepLimits, behavior["limits"], source="walk_mpc.yaml behavior.limits")
    planner = node_section(document, "mpc_planner")["planner"]
    robot = RobotModel()
    q = robot.reference_configuration()
    feet = {"left": np.asarray(robot.frame_pose(q, robot.left_foot_frame)[0][:2]),
            "right": np.asarray(robot.frame_pose(q, robot.right_foot_frame)[0][:2])}
    mpc = from_mapping(MpcParameters, planner["mpc"], source="walk_mpc.yaml planner.mpc")
    return Setup(mass=float(robot.mass), mpc=mpc, limits=limits,
                 double_support=float(behavior["timing"]["double_support_duration"]),
                 sole=(talos.sole.front, talos.sole.back, talos.sole.left, talos.sole.right),
                 com=np.asarray(robot.com(q))[:2], feet=feet)


def walk_parameters(setup: Setup, **changes) -> CapturabilityParameters:
    """The walk's limits: the step limits, the shortest step (``min_duration``), the walk's double support."""
    lim = setup.limits
    base = dict(omega=setup.omega, mass=setup.mass, sole_front=setup.sole[0], sole_back=setup.sole[1],
                sole_left=setup.sole[2], sole_right=setup.sole[3], max_forward=lim.max_forward,
                max_backward=lim.max_backward, min_width=lim.min_width, max_width=lim.max_width,
                min_crossover_width=lim.min_crossover_width, max_crossover_width=lim.max_crossover_width,
                double_support_duration=setup.double_support,
                single_support_duration=lim.min_duration - setup.double_support)
    base.update(changes)
    return CapturabilityParameters(**base)


def nominal_walk(robot: RobotModel, zmp_inward_offset: float = 0.0, gait: robustness.Gait | None = None):
    """(timeline, planned CoM state at t (3, 2), the single support phase of step 3) of the pushes' walk
    (``gait``: another single / double support than the benchmark's 0.8 / 0.3 s, its 6 steps of 0.2 m)."""
    gait = gait if gait is not None else robustness.Gait(steps=6)
    timeline = robustness.timeline_of(robot, gait)
    params = dataclasses.replace(default_planner_parameters(robot, robot.reference_configuration(),
                                                            ClosedLoopParameters().control_period),
                                 zmp_inward_offset=zmp_inward_offset)
    planner = MpcPlanner(params, timeline)
    phase = next(ph for ph in timeline.phases if ph.kind is PhaseKind.SINGLE and ph.step_index == 3)
    if not phase.foot(phase.swing_foot).position[1] > phase.foot(phase.swing_foot.other).position[1]:
        raise SystemExit("step 3 is expected to swing the left foot (DIRECTIONS: outward is -y)")
    states = {}
    t, period = 0.0, params.control_period
    while t < phase.t_end + 1e-9:
        planner.step(t)
        states[round(t, 6)] = planner.planned_state(t)
        t = round(t + period, 6)

    def state_at(time: float) -> np.ndarray:
        before = max(k for k in states if k <= time + 1e-9)
        return _integrate(states[before], time - before)

    return timeline, state_at, phase


def _integrate(state: np.ndarray, dt: float) -> np.ndarray:
    """The CoM state (3, 2) ``dt`` later at constant acceleration (the plans are piecewise-constant jerk: the
    planned states are every control period; the push middles fall on them)."""
    out = state.copy()
    out[0] = state[0] + state[1] * dt + 0.5 * state[2] * dt * dt
    out[1] = state[1] + state[2] * dt
    return out


def touchdown_times(elapsed: float, remaining: float, adjust: StepAdjustmentParameters | None) -> list:
    """Times [s] from the push's middle at which the swinging foot may land (``elapsed`` since lift-off,
    ``remaining`` to the planned touchdown); ``adjust``: step timing's range, else only the planned one."""
    times = [remaining]
    if adjust is None:
        return times
    decision = max(0.0, adjust.min_swing_time - elapsed)  # from the push's middle
    if remaining - decision < adjust.min_time_to_touchdown:
        return times
    lowest = decision + adjust.shortest_time_to_touchdown
    highest = decision + (remaining - decision) * (1.0 + adjust.max_lengthening)
    tau = lowest
    while tau <= highest + 1e-9:
        times.append(round(tau, 6))
        tau += 0.01
    return times


DIRECTIONS = {"forward": (1.0, 0.0), "backward": (-1.0, 0.0), "outward": (0.0, -1.0), "inward": (0.0, 1.0)}


def walking_table(setup: Setup, robot: RobotModel, adjust: StepAdjustmentParameters,
                  zmp_inward_offset: float = 0.0, directions=tuple(DIRECTIONS)) -> list:
    """Rows (direction, N, phase name, (a), (b), nominal DCM in the stance frame)."""
    timeline, state_at, phase = nominal_walk(robot, zmp_inward_offset)
    stance = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
    swing_y = phase.foot(phase.swing_foot).position[1]
    side = 1 if swing_y > stance[1] else -1  # the swinging foot lands to the stance sole's left: +1
    params = walk_parameters(setup)
    rows = []
    for name in directions:
        unit = DIRECTIONS[name]
        if side == -1:
            unit = (unit[0], -unit[1])
        for steps in (0, 1, 2, 3):
            for label, elapsed in PHASES:
                t = phase.t_start + elapsed
                state = state_at(t)
                xi = setup.dcm_in(state, stance)
                remaining = phase.t_end - t
                a = largest_capturable_impulse(params, xi, unit, side,
                                               touchdown_times(elapsed, remaining, None), steps)
                b = largest_capturable_impulse(params, xi, unit, side,
                                               touchdown_times(elapsed, remaining, adjust), steps)
                rows.append((name, steps, label, a, b, xi))
    return rows


#: Brisker gaits than the benchmark's (single / double support [s]; the same 0.2 m steps).
GAITS = ((0.8, 0.3), (0.7, 0.2), (0.6, 0.2), (0.5, 0.2), (0.6, 0.1), (0.5, 0.1), (0.4, 0.1))


def gait_row(setup: Setup, robot: RobotModel, adjust: StepAdjustmentParameters, single: float, double: float,
             zmp_inward_offset: float, fraction: float) -> dict:
    """Direction -> ((a), (b)) [N s], 3 steps, a push at ``fraction`` of step 3's single support of a walk
    with that ``single`` / ``double`` support [s] (every later step the shortest the limits allow, with
    that double support)."""
    gait = robustness.Gait(steps=6, single=single, double=double)
    _, state_at, phase = nominal_walk(robot, zmp_inward_offset, gait)
    stance = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
    params = walk_parameters(setup, double_support_duration=double,
                             single_support_duration=max(setup.limits.min_duration - double, 0.1))
    elapsed = round(single * fraction / 0.02) * 0.02  # on the planner's control periods
    state = state_at(phase.t_start + elapsed)
    xi = setup.dcm_in(state, stance)
    remaining = phase.t_end - phase.t_start - elapsed
    return {name: tuple(largest_capturable_impulse(params, xi, unit, 1,
                                                   touchdown_times(elapsed, remaining, adj), 3)
                        for adj in (None, adjust))
            for name, unit in DIRECTIONS.items()}


def standing_limit(setup: Setup, unit: tuple, steps: int, params: CapturabilityParameters, sway: float,
                   swing: float) -> float:
    """Largest standing push [N s] along ``unit`` capturable in ``steps`` (the first step by either foot)."""
    best = 0.0
    shift = push_dcm_shift(1.0, setup.mass, setup.omega, robustness.PUSH_DURATION)
    for stance, other, side in (("right", "left", 1), ("left", "right", -1)):
        origin = setup.feet[stance]
        region = standing_capture_region(params, side, setup.feet[other] - origin, sway, swing, steps)
        xi = setup.com - origin
        low, high = 0.0, None
        probe = 0.5
        while probe < 200.0:
            if not region.contains(xi + probe * shift * np.asarray(unit)):
                high = probe
                break
            low = probe
            probe += 0.5
        while high is not None and high - low > 0.01:
            middle = 0.5 * (low + high)
            if region.contains(xi + middle * shift * np.asarray(unit)):
                low = middle
            else:
                high = middle
        best = max(best, low)
    return best


#: The limits tried one at a time for a direction below the target: (name, the walk's value or None, the other
#: end of the search, unit). "touchdown": the swinging step's touchdown [s] after the push's middle.
CANDIDATES = {
    "forward": (("max_forward", 1.0, "m"), ("touchdown", 0.0, "s after the push"),
                ("double_support_duration", 0.0, "s"), ("single_support_duration", 0.0, "s")),
    "backward": (("max_backward", 1.0, "m"), ("touchdown", 0.0, "s after the push"),
                 ("double_support_duration", 0.0, "s"), ("single_support_duration", 0.0, "s")),
    "inward": (("max_width", 1.5, "m"), ("touchdown", 0.0, "s after the push"),
               ("double_support_duration", 0.0, "s"), ("single_support_duration", 0.0, "s")),
    "outward": (("max_width", 1.5, "m"), ("touchdown", 0.0, "s after the push"),
                ("double_support_duration", 0.0, "s"), ("single_support_duration", 0.0, "s"),
                ("sole_right", 0.3, "m (the stance sole's outer half-width)"),
                ("max_crossover_width", 0.6, "m (a crossover allowed from 0.15 m)")),
}


def needed(setup: Setup, robot: RobotModel, adjust: StepAdjustmentParameters | None, direction: str,
           name: str, other_end: float, elapsed: float, steps: int = 3) -> str:
    """The value of the limit ``name`` alone (the rest the walk's) from which the ``direction`` push of
    :data:`TARGET` at ``elapsed`` [s] after lift-off is capturable (with ``adjust``: (b), else (a)), by
    bisection between its value and ``other_end``; '-' when even ``other_end`` is not enough."""
    timeline, state_at, phase = nominal_walk(robot)
    stance = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
    t = phase.t_start + elapsed
    state = state_at(t)
    xi = setup.dcm_in(state, stance)
    remaining = phase.t_end - t
    times = touchdown_times(elapsed, remaining, adjust)
    unit = DIRECTIONS[direction]
    params = walk_parameters(setup)

    def impulse(value: float) -> float:
        if name == "touchdown":  # the earliest touchdown allowed: this
            return largest_capturable_impulse(params, xi, unit, 1, [tau for tau in times if tau >= value]
                                              + [value], steps)
        changes = {name: value}
        if name == "max_crossover_width":
            changes["min_crossover_width"] = 0.15
        return largest_capturable_impulse(walk_parameters(setup, **changes), xi, unit, 1, times, steps)

    if name == "max_crossover_width":  # none now: any crossover 0.15 m up to the value
        if impulse(0.15 + 1e-6) >= TARGET:
            return "any crossover (0.15 m across suffices)"
        current, now = 0.15, "none"
    else:
        current = min(times) if name == "touchdown" else getattr(params, name)
        now = f"{current:g}"
    if impulse(other_end) < TARGET:
        return f"not even {other_end:g} ({impulse(other_end):.1f} N s)"
    good, bad = other_end, current
    for _ in range(40):
        middle = 0.5 * (good + bad)
        if impulse(middle) >= TARGET:
            good = middle
        else:
            bad = middle
    return f"{good:.3f} (now {now})"


def cell(a: float, b: float) -> str:
    """A table cell '(a) / (b)' ('-' for 0: the nominal state needs a step)."""
    return " / ".join(f"{v:.1f}" if v > 0.0 else "-" for v in (a, b))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    setup = read_setup()
    robot = RobotModel()
    adjust = StepAdjustmentParameters(enabled=True, adapt_timing=True)
    lim = setup.limits
    print(f"Talos: mass {setup.mass:.2f} kg, LIPM height {setup.com_height:.4f} m "
          f"(omega {setup.omega:.3f} 1/s), sole front/back/left/right {setup.sole} m; walk limits: forward "
          f"{lim.max_forward}, backward {lim.max_backward}, width {lim.min_width}-{lim.max_width} m "
          f"(crossover {lim.max_crossover_width}), min_duration {lim.min_duration} s with double support "
          f"{setup.double_support} s (swing "
          f"{lim.min_duration - setup.double_support:.2f} s)")
    per = push_dcm_shift(1.0, setup.mass, setup.omega, robustness.PUSH_DURATION)
    print(f"a 0.1 s push moves the DCM {1000 * per:.3f} mm per N s ({TARGET:g} N s: {TARGET * per:.3f} m)")
    print("(b) step timing: " + ", ".join(f"{k} {getattr(adjust, k)}" for k in (
        "min_swing_time", "min_time_to_touchdown", "shortest_time_to_touchdown", "max_lengthening")))

    rows = walking_table(setup, robot, adjust)
    print("\nWalking push [N s], step 3 (stance right at its sole, left swinging), largest capturable "
          "(a) walk limits / (b) with step timing; measured best (setting) / default beside:")
    header = "| direction | N | " + " | ".join(label for label, _ in PHASES) + " | measured |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name in DIRECTIONS:
        for steps in (0, 1, 2, 3):
            cells = [cell(a, b) for (n, s, _, a, b, _) in rows if n == name and s == steps]
            best, default, how = MEASURED_WALKING[name]
            measured = f"{best} ({how}) / {default}" if steps == 0 else ""
            print(f"| {name} | {steps} | " + " | ".join(cells) + f" | {measured} |")
    print("nominal DCM in the stance sole's frame at the push middles [m]: " + ", ".join(
        f"{label} ({xi[0]:+.3f}, {xi[1]:+.3f})" for (n, s, label, _, _, xi) in rows
        if n == "forward" and s == 0))
    for column, pick in (("a", 3), ("b", 4)):
        print(f"tightest push time, 3 steps, ({column}): " + ", ".join(
            f"{name} {min((r[pick], r[2]) for r in rows if r[0] == name and r[1] == 3)[1]} "
            f"({min(r[pick] for r in rows if r[0] == name and r[1] == 3):.1f})" for name in DIRECTIONS))

    offset_rows = walking_table(setup, robot, adjust, zmp_inward_offset=0.035, directions=("outward",))
    print("\nOutward with the planner's zmp_inward_offset 0.035 m (the measured 31.2's setting), (a) / (b):")
    for steps in (0, 1, 2, 3):
        cells = [cell(a, b) for (n, s, _, a, b, _) in offset_rows if s == steps]
        print(f"| outward | {steps} | " + " | ".join(cells) + " |")

    print("\nOutward at the benchmark's push, 3 steps, (a) / (b), other step timings (swing: the later "
          "steps' single support):")
    print("| swing [s] | double support [s] | planned ZMP | zmp_inward_offset 0.035 m |")
    print("|---|---|---|---|")
    for swing, double in ((0.1, 0.3), (0.25, 0.3), (0.25, 0.1), (0.25, 0.0), (0.1, 0.1)):
        cells = []
        for offset in (0.0, 0.035):
            _, state_at, phase = nominal_walk(robot, offset)
            elapsed = PHASES[2][1]
            state = state_at(phase.t_start + elapsed)
            stance = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
            xi = setup.dcm_in(state, stance)
            params = walk_parameters(setup, single_support_duration=swing, double_support_duration=double)
            remaining = phase.t_end - phase.t_start - elapsed
            cells.append(cell(*(largest_capturable_impulse(params, xi, DIRECTIONS["outward"], 1,
                                                           touchdown_times(elapsed, remaining, adj), 3)
                                for adj in (None, adjust))))
        print(f"| {swing} | {double} | " + " | ".join(cells) + " |")

    print("\nBrisker gaits (0.2 m steps), 3 steps, the push at the middle of step 3's single support, "
          "(a) / (b); forward; backward; outward; inward:")
    print("| single / double support [s] | planned ZMP | zmp_inward_offset 0.035 m |")
    print("|---|---|---|")
    for single, double in GAITS:
        cells = []
        for offset in (0.0, 0.035):
            row = gait_row(setup, robot, adjust, single, double, offset, 0.5)
            cells.append("; ".join(cell(*row[name]) for name in DIRECTIONS))
        print(f"| {single} / {double} | " + " | ".join(cells) + " |")

    print("\nStanding push [N s] (standing CoM, both soles), largest capturable with N steps; measured "
          "without a step / default recovery steps / best with recovery steps:")
    default = RecoveryStepParameters()
    quick = dict(sway=0.05, swing=0.25, double=0.1)
    standing_default = walk_parameters(setup, single_support_duration=default.single_support_duration,
                                       double_support_duration=default.double_support_duration)
    standing_quick = walk_parameters(setup, single_support_duration=quick["swing"],
                                     double_support_duration=quick["double"], max_backward=0.25,
                                     min_crossover_width=0.15, max_crossover_width=0.3)
    print("| direction | 0 steps | 1 / 2 / 3 steps, recovery defaults | 1 / 2 / 3, quick steps + crossover | "
          "measured |")
    print("|---|---|---|---|---|")
    for name, unit in (("forward", (1, 0)), ("backward", (-1, 0)), ("left", (0, 1)), ("right", (0, -1))):
        zero = standing_limit(setup, unit, 0, standing_default, default.sway_duration,
                              default.single_support_duration)
        dflt = [standing_limit(setup, unit, n, standing_default, default.sway_duration,
                               default.single_support_duration) for n in (1, 2, 3)]
        fast = [standing_limit(setup, unit, n, standing_quick, quick["sway"], quick["swing"])
                for n in (1, 2, 3)]
        print(f"| {name} | {zero:.1f} | " + " / ".join(f"{v:.1f}" for v in dflt) + " | "
              + " / ".join(f"{v:.1f}" for v in fast) + " | "
              + " / ".join(f"{v}" for v in MEASURED_STANDING[name]) + " |")

    print(f"\nWhat one limit alone would have to be for {TARGET:g} N s in 3 steps (directions below it):")
    for column, adj in (("a", None), ("b", adjust)):
        for label, elapsed in (PHASES[0], PHASES[2]):
            for direction in DIRECTIONS:
                value = next((a if column == "a" else b) for (n, s, lab, a, b, _) in rows
                             if n == direction and s == 3 and lab == label)
                if value >= TARGET:
                    continue
                print(f"  ({column}) {label}, {direction} ({value:.1f} N s):")
                for name, other_end, unit in CANDIDATES[direction]:
                    value = needed(setup, robot, adj, direction, name, other_end, elapsed)
                    print(f"    {name}: {value} {unit}")


if __name__ == "__main__":
    main()
