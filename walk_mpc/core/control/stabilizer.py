"""DCM stabilizer at the hardware rate: measured DCM and ZMP -> offsets of the whole-body IK's targets.

:class:`Stabilizer` closes the balance loop that the MPC's CoM feedback leaves open between its ticks, on
what a real robot measures (:class:`~walk_mpc.core.sensors.SensorSample`: joint encoders, IMU, sole contact
forces; the simulator's base pose only with ``use_base_estimate``). It observes every sample (10 ms) and
keeps small offsets that :class:`~walk_mpc.core.control.whole_body_stage.WholeBodyStage` adds to the IK
targets of its ticks; disabled, it is never called and the commands are those of the stage without it.

Each sample (LIPM, ``omega = sqrt(g / h)``, ``h`` the reference CoM height above its ZMP):

1. **Measurement.** Sole forces and centres of pressure from the contact sensors (``<foot>_<corner>``,
   corners ``fl fr bl br`` at the sole extents); a sole carries weight above ``min_contact_force``. The
   configuration from the encoders, the base orientation from the IMU and its position from the leg
   kinematics of the soles in contact, anchored where the IK puts them
   (:func:`~walk_mpc.core.body.state_estimation.estimate_state_from_imu`); CoM and its velocity, the DCM
   ``xi = c + c_dot / omega`` (low-pass filtered), the measured ZMP (force-weighted sole CoPs).
2. **DCM feedback** (Englsberger 2015, Caron 2019): ``p_des = p_ref + (1 + k_p / omega) (xi - xi_ref) +
   (k_i / omega) I`` with ``I`` the leaky integral of the DCM error, then clamped into the support polygon
   of the soles in contact (shrunk by ``support_margin``).
3. **Force distribution** in double support: ``p_des`` projected on the segment between the soles gives
   each sole's share of the measured total force; the rest of ``p_des`` is each sole's desired CoP.
4. **Realisation** on position-controlled joints, by admittance (each offset leaks back to zero):
   * CoM admittance: the CoM target moves at ``-com_admittance (p_des - p_zmp)`` (the CoM accelerating
     away from a ZMP pushes the ZMP towards it);
   * ankle (CoP) admittance with damping: each sole in contact rotates (roll, pitch about its own axes)
     at ``cop_admittance`` times the error of the ankle torque ``tau_measured - tau_desired`` (the sole
     complies with the ground's torque until its CoP is the desired one); a sole in the air returns flat;
   * foot force difference control: with both soles loaded, their height difference ``z_L - z_R`` moves at
     ``force_difference_admittance ((f_L - f_R) - (f_L - f_R)_desired)`` (the sole carrying too much rises:
     unseen ground heights); a sole that has been in the air since its planned swing and is planned on the
     ground again, a late landing, goes down (the other up) until it carries its half. A sole stepping down
     (its target ``landing_confirm_drop`` or more below the other's: known stairs) has landed only once it
     has carried weight for ``landing_confirm_time`` without a break (its touchdown impact bounces it off
     the ground: still a late landing); any other sole as soon as it carries weight. For ``landing_window``
     after its landing, a sole planned on the ground that carries no weight again (the impact bounced it
     off the ground) is lowered too, toward its share of the desired ZMP in the polygon of both soles
     (off by default); later (standing, tipping over an edge) it is not.

**Known sloped ground** (StepData normal): the reference carries the tilt of each sole's ground
(:attr:`~walk_mpc.core.control.types.CoMReference.sole_tilt`); the output's sole roll and pitch are then that
tilt with the ankle offsets applied about the tilted sole's own axes (``Ry(pitch) Rx(roll)`` of the tilt times
that of the offsets, as Z-Y-X angles), so the stage's ``sole_rotation(yaw, roll, pitch)`` lands and keeps the
soles flat on their ground. The measurement works in the tilted sole frames already: the CoPs are measured
in the sole (its corner sensors), the support polygon and the world CoPs are the measured soles' corners and
CoPs projected on the ground plane, the force difference compares the soles' normal forces.

**Tipping stance sole** (``tip_angle``, off by default): in single support, when the stance sole is measured
turned over its toe (heel) while the DCM is beyond that edge, the robot rotates about the edge as a whole by
the difference between where its CoM is and where the IK's posture puts it over a flat sole; the CoM target
then follows the measured CoM, which keeps the sole flat and the swinging foot's target where the step
adjuster wants it.

Output: :class:`StabilizerOutput` (read-only), and :meth:`Stabilizer.log` for tracing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from walk_mpc.core.body.robot import RobotModel, roll_pitch_of, sole_rotation
from walk_mpc.core.body.state_estimation import estimate_state, estimate_state_from_imu
from walk_mpc.core.control.types import NS_PER_S, CoMReference
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.step import Foot

GRAVITY = 9.81  # [m/s^2]
CORNER_NAMES = ("fl", "fr", "bl", "br")  # contact sensors of a sole: front-left, front-right, back-left, ...
FOOT_PREFIXES = ("left_foot", "right_foot")  # contact sensor prefixes of the left and right soles


@dataclasses.dataclass(frozen=True)
class StabilizerParameters:
    """Parameters of :class:`Stabilizer` (HRP-4's published gains as defaults where they exist).

    Attributes:
        enabled: Run the stabilizer (False: the stage never calls it; its commands are bit for bit those
            of the stage without stabilizer).
        dcm_gain: Proportional DCM gain ``k_p`` [1/s] (HRP-4: 5).
        dcm_integral_gain: Integral DCM gain ``k_i`` [1/s^2] (HRP-4: 10).
        dcm_integral_time: Time constant [s] of the integral's leak (an exponential window).
        dcm_filter_time: Time constant [s] of the low-pass filter of the measured DCM (0: none).
        com_admittance: CoM admittance [1/s]: CoM offset velocity per metre of ZMP error (0 by default:
            measured on MuJoCo, 0.5 moved the CoM outwards when the ZMP saturated at a sole edge, the
            desired ZMP a margin inside it, and cost pushes: 30 N s forward fell, survived at 0).
        dcm_com_gain: CoM target offset velocity per metre of DCM error [1/s], against it (a stiff robot
            tipping over a sole edge comes back only by moving its mass back over the support: its ZMP is
            saturated there, where the ZMP-based CoM admittance does not help).
        com_offset_limit: Largest horizontal CoM offset [m].
        dcm_com_release_distance: While walking (steps are coming: a recovery walk, a crossover step), when
            the measured DCM is farther than this [m] outside the support polygon of the soles in contact,
            the CoM offset against the DCM error stops growing (it leaks): there only a step catches it, and
            the CoM held back costs the step its reach; 0 (default): never released. Standing it is never
            released (on MuJoCo Talos the CoM offset then held 43.8 N s sideways, 25-28 N s when released).
        cop_admittance: Ankle admittance [rad/(s N m)]: sole rotation velocity per N m of ankle torque
            error (HRP-4: 0.01).
        ankle_offset_limit: Largest sole roll / pitch offset [rad].
        force_difference_admittance: Foot force difference gain [m/(s N)] (HRP-4: 1e-4; measured on MuJoCo
            Talos, 2e-4 built sole height differences of about 1 cm in double support that tilted the
            robot sideways: DCM errors of 5-7 cm in single support on flat ground, falls).
        landing_confirm_time: Time [s] a sole stepping down (``landing_confirm_drop``) must carry weight
            (above ``min_contact_force``, without a break) after its planned swing to count as landed; until
            then its late landing is corrected (0: landed at its first contact, as any other sole). Measured
            on MuJoCo Talos, known 10 cm stairs, state estimated: after a 20 cm step down the touchdown
            impact (2600 N in one sample) bounced the sole off the floor; counted as the landing, the sole
            was not lowered but raised by the impact, hovered 0.5 cm up through the double support and Talos
            tipped over the other sole's edge (4 of 9 placements of the edges walked two flights; 9 with
            0.05 s).
        landing_confirm_drop: How far [m] below the other sole's target a landing sole's target must be
            for ``landing_confirm_time`` (level or upward landings, flat ground: their first contact).
        landing_window: Time [s] after a sole's landing (its first contact, or its confirmation) during which
            a sole planned on the ground that carries no weight (below ``min_contact_force``) while both are
            planned on the ground is lowered (the other raised) toward its share of the desired ZMP (before
            the clamp into the soles in contact, projected into the polygon of both soles); 0 (default):
            never after its landing. Measured on MuJoCo Talos (0.2 m steps, state estimated):
            the level touchdowns bounced the landed sole off the ground 0.05 s after its first contact;
            counted as landed, nothing lowered it, it carried nothing through most of the 0.3 s double
            support, the desired ZMP stayed clamped on the other sole's inner edge and the sway overshot
            (the CoM at mid single support 1 cm nearer the stance sole's outer edge than with the
            stabilizer off; with a window of 0.3 s as off). Later than this, a sole that leaves the ground
            (a robot tipping over an edge, standing) is not lowered: lowering it made a 37 N s lateral
            standing push fall. Off by default: with 0.3 s the walking push rows gain (no more holes in
            survival: forward, inward) but the fastest gait and one bisection step backward are lost
            (README, Balance).
        height_offset_limit: Largest height difference between the soles [m].
        leak_time: Time constant [s] with which every offset returns to zero (the damping of the
            admittances).
        swing_leak_time: Time constant [s] with which the offsets of a sole in the air return to zero (it
            lands as planned).
        min_contact_force: Normal force [N] from which a sole is in contact.
        support_margin: The desired ZMP stays this far [m] inside the soles' edges.
        sole_front: Sole extent ahead of the sole frame [m] (where the front contact sensors are).
        sole_back: Sole extent behind the sole frame [m].
        sole_left: Sole extent to the left of the sole frame [m].
        sole_right: Sole extent to the right of the sole frame [m].
        use_base_estimate: Use the sample's base pose when valid (a state estimator; in simulation the
            truth) instead of the IMU and leg kinematics.
        tip_angle: Tipping stance sole [rad] (0, the default: off): while the planned stance sole is alone
            on the ground and measured pitched more than this from its commanded orientation over its toe
            (heel up) with the measured DCM beyond its front edge (or over its heel with the DCM beyond its
            back edge; ``support_margin`` inside them), the CoM target follows the measured CoM (both axes,
            ``tip_com_follow_time``; the CoM offset against the DCM error paused), so that the IK's posture
            has the sole flat where the robot is. Measured on MuJoCo Talos (state estimated, walking forward
            pushes of 40 N s): the CoM target, the planner's reference lagging the pushed CoM and the CoM
            offset against the DCM error, stayed 9 cm behind the CoM; the joints holding that posture, the
            robot turned about the stance toe by the difference (6 degrees), the swinging foot landed 5 cm
            short, toe first, and the robot went on turning over it. With 0.035 the stance sole stays within
            1-2 degrees and the swinging foot lands flat at its target (with ``zmp_inward_offset`` 0.035 m,
            step adjustment and timing: every push of 1.25-40 N s stands, before 1.25-26.2 and 28.8-32.5;
            the other walking push rows unchanged, README, Balance).
        tip_com_follow_time: Time constant [s] with which the CoM target follows the measured CoM while the
            stance sole tips (``tip_angle``).
        tip_com_offset_limit: Largest offset [m] of the CoM target following the measured CoM (on top of
            ``com_offset_limit``'s).
        tip_release_time: Time constant [s] with which that offset returns to zero once the sole no longer
            tips.
    """

    enabled: bool = False
    dcm_gain: float = 5.0
    dcm_integral_gain: float = 10.0
    dcm_integral_time: float = 1.0
    dcm_filter_time: float = 0.01
    com_admittance: float = 0.0
    dcm_com_gain: float = 2.5
    com_offset_limit: float = 0.05
    dcm_com_release_distance: float = 0.0
    cop_admittance: float = 0.01
    ankle_offset_limit: float = 0.15
    force_difference_admittance: float = 1e-4
    landing_confirm_time: float = 0.05
    landing_confirm_drop: float = 0.02
    landing_window: float = 0.0
    height_offset_limit: float = 0.05
    leak_time: float = 2.0
    swing_leak_time: float = 0.1
    min_contact_force: float = 30.0
    support_margin: float = 0.01
    sole_front: float = 0.1
    sole_back: float = 0.1
    sole_left: float = 0.065
    sole_right: float = 0.065
    use_base_estimate: bool = False
    tip_angle: float = 0.0
    tip_com_follow_time: float = 0.05
    tip_com_offset_limit: float = 0.1
    tip_release_time: float = 0.3

    def __post_init__(self) -> None:
        for name in ("enabled", "use_base_estimate"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        for name in ("dcm_gain", "dcm_integral_gain", "dcm_filter_time", "com_admittance", "dcm_com_gain",
                     "com_offset_limit", "dcm_com_release_distance",
                     "cop_admittance", "ankle_offset_limit", "force_difference_admittance",
                     "landing_confirm_time", "landing_confirm_drop", "landing_window",
                     "height_offset_limit", "min_contact_force", "support_margin", "tip_angle",
                     "tip_com_offset_limit"):
            check_nonnegative(name, getattr(self, name))
        for name in ("dcm_integral_time", "leak_time", "swing_leak_time", "sole_front", "sole_back",
                     "sole_left", "sole_right", "tip_com_follow_time", "tip_release_time"):
            check_positive(name, getattr(self, name))
        smallest = min(self.sole_front + self.sole_back, self.sole_left + self.sole_right)
        if 2.0 * self.support_margin >= smallest:
            raise ParameterError("support_margin", self.support_margin, "less than half the sole's size [m]")


@dataclasses.dataclass(frozen=True)
class StabilizerOutput:
    """Offsets of the IK targets (world frame; sole rotations about the sole's own axes).

    Attributes:
        com_offset: Offset of the CoM target [m], shape (3,) (horizontal).
        sole_offsets: Foot -> (roll [rad], pitch [rad], height [m]) of its sole target (on known sloped
            ground: its ground's tilt with the ankle offsets about the tilted axes, module docstring).
        active: Whether any offset is nonzero.
    """

    com_offset: np.ndarray
    sole_offsets: dict
    active: bool


_ZERO_OUTPUT = StabilizerOutput(np.zeros(3), {Foot.LEFT: (0.0, 0.0, 0.0), Foot.RIGHT: (0.0, 0.0, 0.0)}, False)
_ZERO_OUTPUT.com_offset.flags.writeable = False


def _cross2(a: np.ndarray, b: np.ndarray) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull of 2D points (monotone chain), shape (k, 2)."""
    pts = sorted({(float(x), float(y)) for x, y in points})
    if len(pts) <= 2:
        return np.array(pts)
    lower: list = []
    for p in pts:
        while len(lower) >= 2 and _cross2(np.subtract(lower[-1], lower[-2]), np.subtract(p, lower[-2])) <= 0:
            lower.pop()
        lower.append(p)
    upper: list = []
    for p in reversed(pts):
        while len(upper) >= 2 and _cross2(np.subtract(upper[-1], upper[-2]), np.subtract(p, upper[-2])) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def clamp_to_polygon(point: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """The point of the convex polygon (counter-clockwise vertices, shape (k, 2)) closest to ``point``."""
    point = np.asarray(point, dtype=float)
    k = len(polygon)
    if k == 0:
        return point.copy()
    if k == 1:
        return polygon[0].copy()
    inside = k >= 3 and all(_cross2(polygon[(i + 1) % k] - polygon[i], point - polygon[i]) >= 0.0
                            for i in range(k))
    if inside:
        return point.copy()
    best, best_distance = polygon[0].copy(), math.inf
    for i in range(k if k >= 3 else 1):
        a, b = polygon[i], polygon[(i + 1) % k]
        edge = b - a
        s = min(max(float((point - a) @ edge) / max(float(edge @ edge), 1e-18), 0.0), 1.0)
        candidate = a + s * edge
        distance = float(np.sum((point - candidate) ** 2))
        if distance < best_distance:
            best, best_distance = candidate, distance
    return best


class Stabilizer:
    """DCM feedback and admittance offsets from each sensor sample (module docstring).

    Example:
        >>> stabilizer = Stabilizer(robot, Stabilizer.Parameters(enabled=True))
        >>> stabilizer.set_reference(reference)                # each CoM reference of the planner
        >>> out = stabilizer.observe(stamp_ns, sample, soles)  # each sample: soles = IK sole targets
        >>> out.com_offset, out.sole_offsets[Foot.LEFT]
    """

    Parameters = StabilizerParameters

    def __init__(self, robot: RobotModel, params: Optional[StabilizerParameters] = None) -> None:
        self.params = params if params is not None else StabilizerParameters()
        if not isinstance(self.params, StabilizerParameters):
            raise ParameterError("params", self.params, "a StabilizerParameters")
        self.robot = robot
        p = self.params
        self._corners = np.array([[p.sole_front, p.sole_left], [p.sole_front, -p.sole_right],
                                  [-p.sole_back, p.sole_left], [-p.sole_back, -p.sole_right]])
        m = p.support_margin
        self._inner = np.array([[p.sole_front - m, p.sole_left - m], [p.sole_front - m, -p.sole_right + m],
                                [-p.sole_back + m, p.sole_left - m], [-p.sole_back + m, -p.sole_right + m]])
        self._frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame} \
            if robot.is_biped else {}
        self._layouts: dict = {}
        self.reset()

    def reset(self) -> None:
        """Forget the reference, the integral, the filter and every offset."""
        self._reference: Optional[CoMReference] = None
        self._last_ns: Optional[int] = None
        self._integral = np.zeros(2)
        self._dcm: Optional[np.ndarray] = None
        self._com_offset = np.zeros(2)  # the CoM target's offset [m]
        self._com_admittance = np.zeros(2)  # its admittance part [m]
        self._tip_offset = np.zeros(2)  # its part following the measured CoM while a sole tips [m]
        self._ankle = {Foot.LEFT: np.zeros(2), Foot.RIGHT: np.zeros(2)}  # (roll, pitch) [rad]
        self._height_difference = 0.0  # z_L - z_R [m]
        self._swinging = {Foot.LEFT: False, Foot.RIGHT: False}  # not landed since a planned swing
        self._contact_time = {Foot.LEFT: 0.0, Foot.RIGHT: 0.0}  # [s] in contact without a break
        self._landed_time = {Foot.LEFT: math.inf, Foot.RIGHT: math.inf}  # [s] since its landing
        self._tilt = {Foot.LEFT: (0.0, 0.0), Foot.RIGHT: (0.0, 0.0)}  # the reference's sole tilts at T [rad]
        self._output = _ZERO_OUTPUT
        self._log: dict = {}

    @property
    def output(self) -> StabilizerOutput:
        """The offsets of the latest sample (zero before any)."""
        return self._output

    def log(self) -> dict:
        """What the latest sample measured and decided (floats and lists, for tracing)."""
        return dict(self._log)

    def set_reference(self, reference: CoMReference) -> None:
        """The planner's reference of a tick (CoM, CoM velocity and ZMP at T and 2T after its stamp)."""
        if not isinstance(reference, CoMReference):
            raise InputError("reference", type(reference).__name__, "a CoMReference")
        self._reference = reference
        tilt = reference.sole_tilt
        tilts = ({Foot.LEFT: (0.0, 0.0), Foot.RIGHT: (0.0, 0.0)} if tilt is None else
                 {foot: (float(tilt[0, int(foot), 0]), float(tilt[0, int(foot), 1])) for foot in Foot})
        if tilts != self._tilt:  # the soles' ground turned (known sloped terrain): the output follows now
            self._tilt = tilts
            self._publish()

    def clear_reference(self) -> None:
        """No reference any more (sensor-driven ticks): the offsets leak back to zero."""
        self._reference = None

    # ------------------------------------------------------------------ the sample
    def _sole_forces(self, sample: SensorSample) -> Optional[tuple]:
        """(force [N], local CoP [m] (2,)) of the left and right soles, or None without their sensors."""
        layout = self._layouts.get(sample.contact_names)
        if layout is None:
            index = {name: i for i, name in enumerate(sample.contact_names)}
            rows = []
            for prefix in FOOT_PREFIXES:
                names = [f"{prefix}_{corner}" for corner in CORNER_NAMES]
                rows.append([index[n] for n in names] if all(n in index for n in names) else None)
            layout = self._layouts[sample.contact_names] = tuple(rows)
        if any(row is None for row in layout):
            return None
        out = []
        for row in layout:
            forces = sample.contact[row]
            total = float(forces.sum())
            cop = (forces @ self._corners) / total if total > 0.0 else np.zeros(2)
            out.append((total, cop))
        return tuple(out)

    def observe(self, stamp_ns: int, sample: SensorSample, soles: dict,
                planned_stance: tuple = (Foot.LEFT, Foot.RIGHT), walking: bool = False) -> StabilizerOutput:
        """One sensor sample (already validated by the caller).

        Args:
            stamp_ns: Its stamp [ns].
            sample: The sample.
            soles: Foot -> (position [m] (3,), yaw [rad]) of its sole target in the IK, without this
                stabilizer's offsets (where a sole in contact is taken to be: leg odometry anchors).
            planned_stance: The feet the plan has on the ground now (both: the force difference control
                acts even if one carries nothing, a late landing).
            walking: Whether a walk is in progress (``dcm_com_release_distance``).

        Returns:
            The offsets to add to the IK targets (:attr:`output`).
        """
        p = self.params
        dt = 0.0 if self._last_ns is None else max(0.0, (stamp_ns - self._last_ns) / NS_PER_S)
        self._last_ns = stamp_ns
        measured = self._sole_forces(sample) if self._frames else None
        if measured is None or dt <= 0.0 or dt > 0.1:
            if measured is None or dt > 0.1:
                self._decay(dt, (False, False))
            return self._output
        (f_left, cop_left), (f_right, cop_right) = measured
        forces = {Foot.LEFT: f_left, Foot.RIGHT: f_right}
        local_cops = {Foot.LEFT: cop_left, Foot.RIGHT: cop_right}
        contact = {foot: forces[foot] >= p.min_contact_force for foot in Foot}
        reference = self._reference
        if reference is None or not any(contact.values()):
            self._decay(dt, tuple(contact.values()))
            return self._output
        # Reference at the sample's time, linear through the reference's two points.
        tau = (stamp_ns - reference.stamp_ns) / NS_PER_S
        t1, t2 = reference.times
        s = (tau - t1) / (t2 - t1)
        com_ref = reference.com_position[0] + s * (reference.com_position[1] - reference.com_position[0])
        vel_ref = reference.com_velocity[0] + s * (reference.com_velocity[1] - reference.com_velocity[0])
        zmp_ref = reference.zmp[0] + s * (reference.zmp[1] - reference.zmp[0])
        height = float(com_ref[2] - zmp_ref[2])
        if not height > 0.05:
            self._decay(dt, tuple(contact.values()))
            return self._output
        omega = math.sqrt(GRAVITY / height)
        # Measured state: encoders, IMU, leg kinematics of the soles in contact.
        state = self._measure(sample, soles, contact, forces)
        if state is None:
            self._decay(dt, tuple(contact.values()))
            return self._output
        com, com_velocity, sole_poses = state
        xi = com[:2] + com_velocity[:2] / omega
        if self._dcm is None or p.dcm_filter_time <= 0.0:
            self._dcm = xi
        else:
            self._dcm = self._dcm + (xi - self._dcm) * min(1.0, dt / p.dcm_filter_time)
        xi_ref = com_ref[:2] + vel_ref[:2] / omega
        error = self._dcm - xi_ref
        self._integral = self._integral * math.exp(-dt / p.dcm_integral_time) + error * dt
        desired = (zmp_ref[:2] + (1.0 + p.dcm_gain / omega) * error
                   + (p.dcm_integral_gain / omega) * self._integral)
        # Support polygon of the soles in contact (measured poses), shrunk by the margin.
        world_cops, polygon_points = {}, []
        for foot in Foot:
            position, rotation = sole_poses[foot]
            world_cops[foot] = position[:2] + rotation[:2, :2] @ local_cops[foot]
            if contact[foot]:
                polygon_points.extend(position[:2] + self._inner @ rotation[:2, :2].T)
        polygon = convex_hull(np.array(polygon_points))
        wanted = desired  # before the clamp (a sole bounced off the ground: its share of it, below)
        desired = clamp_to_polygon(desired, polygon)
        total = sum(forces[f] for f in Foot if contact[f])
        zmp = sum(forces[f] * world_cops[f] for f in Foot if contact[f]) / total
        # Force distribution and desired CoP of each sole in contact.
        desired_force, desired_cop = {}, {}
        if contact[Foot.LEFT] and contact[Foot.RIGHT]:
            a, b = sole_poses[Foot.LEFT][0][:2], sole_poses[Foot.RIGHT][0][:2]
            axis = a - b
            share = min(max(float((desired - b) @ axis) / max(float(axis @ axis), 1e-12), 0.0), 1.0)
            rest = desired - (b + share * axis)
            desired_force = {Foot.LEFT: share * total, Foot.RIGHT: (1.0 - share) * total}
            for foot in Foot:
                position, rotation = sole_poses[foot]
                local = rotation[:2, :2].T @ rest
                desired_cop[foot] = clamp_to_polygon(local, convex_hull(self._inner))
        else:
            foot = Foot.LEFT if contact[Foot.LEFT] else Foot.RIGHT
            position, rotation = sole_poses[foot]
            desired_force = {foot: total}
            desired_cop[foot] = rotation[:2, :2].T @ (desired - position[:2])
        # CoM admittance.
        leak = math.exp(-dt / p.leak_time)
        push = p.com_admittance * (desired - zmp)
        released = (p.dcm_com_release_distance > 0.0 and walking  # only a step catches the DCM (parameters)
                    and float(np.linalg.norm(self._dcm - clamp_to_polygon(self._dcm, polygon)))
                    > p.dcm_com_release_distance)
        if not released:
            push = push + p.dcm_com_gain * error
        # Tipping (tip_angle): the planned stance sole, alone on the ground, turned over its toe (heel) with
        # the DCM beyond that edge: the CoM target follows the measured CoM (the CoM shift paused).
        tipping = False
        if p.tip_angle > 0.0 and len(set(planned_stance)) == 1:
            stance = planned_stance[0]
            if contact[stance] and not contact[stance.other]:
                tipping = self._tips(stance, sole_poses[stance], soles[stance][1])
        if tipping:
            push = np.zeros(2)
        self._com_admittance = self._com_admittance * leak - push * dt
        self._com_offset = self._com_admittance.copy()
        norm = float(np.linalg.norm(self._com_offset))
        if norm > p.com_offset_limit:
            self._com_offset *= p.com_offset_limit / norm
            self._com_admittance = np.clip(self._com_admittance, -p.com_offset_limit, p.com_offset_limit)
        if p.tip_angle > 0.0:
            if tipping:
                follow = com[:2] - com_ref[:2] - self._com_offset  # the CoM target onto the measured CoM
                self._tip_offset = self._tip_offset + (follow - self._tip_offset) * min(
                    1.0, dt / p.tip_com_follow_time)
                norm = float(np.linalg.norm(self._tip_offset))
                if norm > p.tip_com_offset_limit:
                    self._tip_offset *= p.tip_com_offset_limit / norm
            else:
                self._tip_offset = self._tip_offset * math.exp(-dt / p.tip_release_time)
            self._com_offset = self._com_offset + self._tip_offset
        # Ankle admittance: rotate with the torque error (tau_x = f y, tau_y = -f x in the sole frame).
        swing_leak = math.exp(-dt / p.swing_leak_time)
        for foot in Foot:
            if contact[foot]:
                f = forces[foot]
                error_cop = local_cops[foot] - desired_cop[foot]
                rate = p.cop_admittance * f * np.array([error_cop[1], -error_cop[0]])
                self._ankle[foot] = np.clip(self._ankle[foot] * leak + rate * dt, -p.ankle_offset_limit,
                                            p.ankle_offset_limit)
            else:
                self._ankle[foot] = self._ankle[foot] * swing_leak
        # Foot force difference control: both soles loaded, or a late landing (a foot that has been in the air
        # since its swing, planned on the ground again: its sole goes down, the other up, until it carries
        # its half). A sole stepping down has landed once it has carried weight for landing_confirm_time (the
        # impact that bounces it off the ground is no landing). Within landing_window of its landing, a sole
        # bounced off the ground goes down toward its share of the desired ZMP (bounced); later, a sole that
        # leaves the ground while planned on it (tipping over an edge) is not lowered.
        for foot in Foot:
            self._contact_time[foot] = self._contact_time[foot] + dt if contact[foot] else 0.0
            self._landed_time[foot] += dt
            if foot not in planned_stance:
                self._swinging[foot] = True
            elif self._swinging[foot] and contact[foot] and (
                    self._contact_time[foot] >= p.landing_confirm_time - 1e-9
                    or soles[foot][0][2] > soles[foot.other][0][2] - p.landing_confirm_drop):
                self._swinging[foot] = False
                self._landed_time[foot] = 0.0
        both_planned = len(set(planned_stance)) == 2
        late = both_planned and any(self._swinging[f] for f in Foot)
        bounced = both_planned and not late and any(
            not contact[f] and self._landed_time[f] < p.landing_window - 1e-9 for f in Foot)
        if contact[Foot.LEFT] and contact[Foot.RIGHT] or late or bounced:
            if late:
                desired_force = {Foot.LEFT: 0.5 * total, Foot.RIGHT: 0.5 * total}
            elif bounced:  # each sole's share of the desired ZMP in the polygon of both
                a, b = sole_poses[Foot.LEFT][0][:2], sole_poses[Foot.RIGHT][0][:2]
                both = convex_hull(np.concatenate([position[:2] + self._inner @ rotation[:2, :2].T
                                                   for position, rotation in sole_poses.values()]))
                axis = a - b
                share = min(max(float((clamp_to_polygon(wanted, both) - b) @ axis)
                                / max(float(axis @ axis), 1e-12), 0.0), 1.0)
                desired_force = {Foot.LEFT: share * total, Foot.RIGHT: (1.0 - share) * total}
            measured_difference = forces[Foot.LEFT] - forces[Foot.RIGHT]
            desired_difference = desired_force[Foot.LEFT] - desired_force[Foot.RIGHT]
            self._height_difference = float(np.clip(
                self._height_difference * leak
                + p.force_difference_admittance * (measured_difference - desired_difference) * dt,
                -p.height_offset_limit, p.height_offset_limit))
        else:
            self._height_difference *= leak
        self._publish()
        self._log = {"omega": omega, "dcm": self._dcm.tolist(), "dcm_reference": xi_ref.tolist(),
                     "dcm_error": error.tolist(), "zmp_reference": zmp_ref[:2].tolist(),
                     "zmp_desired": desired.tolist(), "zmp_measured": zmp.tolist(),
                     "forces": [forces[Foot.LEFT], forces[Foot.RIGHT]]}
        return self._output

    def _tips(self, foot: Foot, pose: tuple, yaw: float) -> bool:
        """Whether the sole of ``foot`` (measured ``pose``: position, rotation; commanded ``yaw`` [rad]) is
        pitched more than ``tip_angle`` from its commanded orientation over its toe (heel up) with the
        measured DCM beyond its front edge, or over its heel with the DCM beyond its back edge (the support
        margin inside them)."""
        p = self.params
        position, rotation = pose
        normal = self._commanded_sole(foot, yaw).T @ rotation[:, 2]  # measured normal, commanded sole frame
        pitch = math.atan2(float(normal[0]), float(normal[2]))  # > 0: over the toe (heel up)
        if abs(pitch) <= p.tip_angle:
            return False
        heading = np.array([math.cos(yaw), math.sin(yaw)])
        along = float((self._dcm - position[:2]) @ heading)
        return (along > p.sole_front - p.support_margin if pitch > 0.0
                else along < -(p.sole_back - p.support_margin))

    def _measure(self, sample: SensorSample, soles: dict, contact: dict, forces: dict) -> Optional[tuple]:
        """(CoM [m], CoM velocity [m/s], Foot -> (sole position, sole rotation)) of the sample, or None."""
        robot = self.robot
        try:
            if self.params.use_base_estimate and sample.base_estimate_valid:
                state = estimate_state(robot, sample.joint_names, sample.joint_pos,
                                       base_pose=(sample.base_position, sample.base_orientation_xyzw),
                                       joint_velocities=sample.joint_vel,
                                       base_twist=(sample.base_linear_velocity, sample.base_angular_velocity))
            else:
                if not len(sample.imu_names):
                    return None
                anchors = {}
                for foot in Foot:
                    if contact[foot]:
                        position, _ = soles[foot]
                        anchors[self._frames[foot]] = (np.asarray(position, dtype=float), forces[foot])
                state = estimate_state_from_imu(robot, sample.joint_names, sample.joint_pos,
                                                sample.imu_names[0], sample.imu_orientation_xyzw[0], anchors,
                                                sample.joint_vel, sample.imu_angular_vel[0])
        except (InputError, KeyError):
            return None
        if state.com_velocity is None:
            return None
        data = robot.data  # estimate_state placed the frames of its configuration in the robot's data
        poses = {}
        for foot in Foot:
            placement = data.oMf[robot.frame_id(self._frames[foot])]
            poses[foot] = (np.array(placement.translation), np.array(placement.rotation))
        return np.asarray(state.com_position), np.asarray(state.com_velocity), poses

    def _decay(self, dt: float, contact: tuple) -> None:
        """Every offset leaks back to zero (no reference, no contact, no sensors)."""
        p = self.params
        leak = math.exp(-dt / p.leak_time) if dt > 0.0 else 1.0
        swing_leak = math.exp(-dt / p.swing_leak_time) if dt > 0.0 else 1.0
        self._integral *= leak
        self._com_admittance *= leak
        self._com_offset = self._com_admittance.copy()
        if p.tip_angle > 0.0:
            self._tip_offset *= math.exp(-dt / p.tip_release_time) if dt > 0.0 else 1.0
            self._com_offset = self._com_offset + self._tip_offset
        for foot, touching in zip(Foot, contact):
            self._ankle[foot] *= leak if touching else swing_leak
            self._landed_time[foot] += dt
        self._height_difference *= leak
        self._dcm = None
        self._publish()

    def _commanded_sole(self, foot: Foot, yaw: float = 0.0) -> np.ndarray:
        """The rotation of the sole of ``foot`` the output commands (yaw ``yaw`` [rad]): the reference's
        ground tilt, then the ankle offsets about the tilted sole's axes (module docstring)."""
        tilt_roll, tilt_pitch = self._tilt[foot]
        return sole_rotation(yaw, tilt_roll, tilt_pitch) @ sole_rotation(
            0.0, float(self._ankle[foot][0]), float(self._ankle[foot][1]))

    def _publish(self) -> None:
        half = 0.5 * self._height_difference
        com = np.array([self._com_offset[0], self._com_offset[1], 0.0])
        com.flags.writeable = False
        sole_offsets = {}
        for foot, height in ((Foot.LEFT, half), (Foot.RIGHT, -half)):
            roll, pitch = float(self._ankle[foot][0]), float(self._ankle[foot][1])
            if any(self._tilt[foot]):  # the offsets about the tilted sole's axes
                roll, pitch = roll_pitch_of(self._commanded_sole(foot))
            sole_offsets[foot] = (roll, pitch, height)
        active = bool(np.any(com) or half or any(np.any(a) for a in self._ankle.values()))
        self._output = StabilizerOutput(com, sole_offsets, active)


__all__ = ["Stabilizer", "StabilizerOutput", "StabilizerParameters", "clamp_to_polygon", "convex_hull",
           "sole_rotation"]
