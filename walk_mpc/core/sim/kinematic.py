"""Kinematic biped plant: servoed joints, a floating base held by the feet in contact, ZMP-split forces.

No dynamics are integrated: the joints follow their position commands through :class:`JointServo`
(latency, first-order lag, joint limits), and the floating base is placed so that the feet in contact
keep their world poses (no slip). Everything else is computed from that motion:

* **Contact.** A foot in contact is *anchored*: its world pose is fixed (no slip). The base is placed
  from the anchored feet: ``anchor * (foot in base)^-1`` (the foot's *candidate*) for a single stance
  foot; in double support the interpolation of the two candidates with the weight
  ``w = clip(1/2 - d / (2 landing_height), 0, 1)`` on the right foot, where ``d`` is the height of the
  right sole above its anchor when the left foot holds the base (about minus the left sole's height
  above its anchor when the right one holds it). While the commanded motion keeps the feet consistent
  (``|d|`` below ``landing_height``) the base is about the mean of the candidates; as soon as the
  commanded motion raises one foot the base is on the other foot's candidate, so the raised foot's
  motion does not drag the base and it lifts off without a jump, when its height exceeds
  ``contact_height``. A foot pushed into the ground (``d < 0``) stays anchored: the feet never flap
  between anchors. A free foot lands when its sole is at ``z <= landing_height`` (hysteresis with
  ``landing_height < contact_height``), or within ``contact_height`` of the ground once the commanded
  motion has set it down (it descended by less than ``landing_height`` in the last step, not rising: a
  plan a fraction of a millimetre above the ground): it is anchored flat on the ground (z = 0, roll and
  pitch zeroed) at its x, y and yaw of that instant. It touched down almost at rest, and a foot
  commanded above its anchor has a small base weight, so the base hardly moves; the ground stays the
  height reference of every landing (no drift of the anchors along a walk). A foot is always anchored
  (the robot cannot fly). At :meth:`~KinematicSim.reset` the feet are flat on the ground.
* **Forces.** Total normal force ``m (g + c_z'')``; dynamic ZMP ``c_xy - c_z / (g + c_z'') c_xy''``
  (``c_z`` is the CoM height above the ground; at ``c_z'' = 0`` this is the ``c - h/g c''`` of the
  linear inverted pendulum). The CoM acceleration is the mean of the second finite differences of the
  CoM over the last ``acceleration_window`` (the command period: joint setpoints are piecewise linear
  between command points, so the sample-to-sample second differences alternate between about twice
  the acceleration and about zero; their mean over one command period is the acceleration), then
  low-pass filtered (``acceleration_filter_time_constant``) as a compliant robot's structure would
  smooth the command breakpoints. Single support: all the force on the stance foot, with its
  centre of pressure (CoP) at the ZMP clipped into the sole. Double support: the share of each foot
  comes from the projection of the ZMP on the segment between the sole centres, and both feet get
  their CoP at their centre plus the ZMP's offset from that projection (clipped into the sole), so the
  forces' CoP is exactly the ZMP whenever no clipping happens. Each foot has four contact sensors at
  its sole corners (``<foot>_fl``, ``_fr``, ``_bl``, ``_br``: front/back, left/right in the sole
  frame) with bilinear weights of the foot's CoP: the force-weighted mean of the corners is the CoP.
  A step at which the CoP differs from the dynamic ZMP by more than ``zmp_clip_tolerance`` (the real
  robot would tip) increments :attr:`SimState.zmp_clip_count`.
* **Torques.** ``tau = RNEA(q, v, a) - J_c^T f_c``: inverse dynamics on the floating-base model with
  ``v`` and ``a`` finite differences of the configuration, minus the contact wrenches (normal forces
  at each foot's CoP, horizontal forces ``m c_xy''`` shared like the normal force). The base rows of
  this balance are not exactly zero (the contact model is the ZMP approximation), so the joint
  torques are a reasonable estimate, not an exact solution.
* **IMU.** At ``imu_frame``: orientation, angular velocity (finite difference of the orientation, IMU
  frame) and accelerometer ``a - g`` (second finite difference of the position, IMU frame; reads
  ``(0, 0, +g)`` at rest and level).
* **Fall.** The base never tips in this plant; :attr:`SimState.fallen` latches if the base tilts more
  than ``fall_tilt`` (a command bending the robot over).

Optional seeded Gaussian noise on the joint and IMU measurements (off by default). Same parameters,
same commands: same samples.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np
import pinocchio as pin

from walk_mpc.core.body.robot import RobotModel, rotation_z, yaw_of
from walk_mpc.core.errors import ModelError, ParameterError
from walk_mpc.core.params import check_int_range, check_nonnegative, check_positive
from walk_mpc.core.sim.backend import (
    GRAVITY,
    JointServo,
    SensorSample,
    ServoedBackend,
    SimState,
    check_dt,
)

#: Contact sensor suffixes of a sole, in order: front-left, front-right, back-left, back-right.
CORNERS = ("fl", "fr", "bl", "br")

#: Foot name prefixes of the contact sensors (left sole first).
FEET = ("left_foot", "right_foot")

#: Contact sensors of a biped: the four sole corners of the left foot, then of the right foot.
CONTACT_NAMES = tuple(f"{foot}_{corner}" for foot in FEET for corner in CORNERS)

_GRAVITY_VECTOR = np.array([0.0, 0.0, -GRAVITY])


def with_robot_defaults(params: KinematicSim.Parameters, robot: RobotModel) -> KinematicSim.Parameters:
    """``params`` with the robot's sole size (all four ``sole_*`` 0) and IMU frame (``imu_frame`` '').

    Raises:
        ModelError: The sole size is not given here and the robot description has none.
    """
    changes = {}
    if not params.sole_given and robot.is_biped:
        sole = robot.sole_size
        changes.update(sole_front=sole.front, sole_back=sole.back, sole_left=sole.left, sole_right=sole.right)
    if not params.imu_frame:
        changes["imu_frame"] = robot.imu_frame
    return dataclasses.replace(params, **changes) if changes else params


class KinematicSim(ServoedBackend):
    """Kinematic floating-base biped tracking joint position commands (see the module docstring).

    Example:
        >>> sim = KinematicSim()
        >>> state = sim.step()
        >>> sim.sensor_sample().contact.sum()  # ~ m g
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Kinematic plant configuration.

        Attributes:
            robot: Robot model (a biped with left and right sole frames).
            hardware_period: Default step [s] (10 ms: the NAO DCM cycle).
            lag_time_constant: First-order lag of the joint servos [s] (0 = exact tracking).
            latency: Delay from a command's reception to its effect [s].
            contact_height: Height [m] above its anchor beyond which the commanded motion lifts a foot
                in contact off the ground (at reset: the other foot stands if within it).
            landing_height: A free sole at or below this height [m] lands (at most ``contact_height``);
                also the height scale of the double-support base weights.
            sole_front: Sole extent ahead of the sole frame origin, along its x axis [m] (all four 0:
                the robot description's sole, see :func:`with_robot_defaults`).
            sole_back: Sole extent behind the origin [m].
            sole_left: Sole extent to the left of the origin, along its y axis [m].
            sole_right: Sole extent to the right of the origin [m].
            imu_frame: Frame of the IMU ('' = the robot description's IMU frame, else the base frame).
            acceleration_window: The CoM acceleration is the mean of the second finite differences
                over this window [s] (rounded to whole steps, at least one; the command period).
            acceleration_filter_time_constant: Low-pass filter of the windowed CoM acceleration used for
                the ZMP, contact forces and contact wrenches [s] (0 = none).
            zmp_clip_tolerance: Distance between the dynamic ZMP and the CoP of the forces above which a
                step counts as clipped [m].
            fall_tilt: Base tilt from the vertical above which the robot has fallen [rad].
            joint_position_noise: Standard deviation of joint/motor position noise [rad].
            joint_velocity_noise: Standard deviation of joint/motor velocity noise [rad/s].
            imu_angular_velocity_noise: Standard deviation of gyroscope noise [rad/s].
            imu_linear_acceleration_noise: Standard deviation of accelerometer noise [m/s^2].
            seed: Seed of the noise generator (re-seeded at each reset).
            initial_joint_names: Joints whose initial position differs from the reference posture.
            initial_joint_positions: Their initial positions [rad], same order.
        """

        robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
        hardware_period: float = 0.01
        lag_time_constant: float = 0.01
        latency: float = 0.0
        contact_height: float = 0.002
        landing_height: float = 0.0001
        sole_front: float = 0.0
        sole_back: float = 0.0
        sole_left: float = 0.0
        sole_right: float = 0.0
        imu_frame: str = ""
        acceleration_window: float = 0.02
        acceleration_filter_time_constant: float = 0.01
        zmp_clip_tolerance: float = 0.002
        fall_tilt: float = 0.5
        joint_position_noise: float = 0.0
        joint_velocity_noise: float = 0.0
        imu_angular_velocity_noise: float = 0.0
        imu_linear_acceleration_noise: float = 0.0
        seed: int = 0
        initial_joint_names: tuple[str, ...] = ()
        initial_joint_positions: tuple[float, ...] = ()

        def __post_init__(self) -> None:
            if not isinstance(self.robot, RobotModel.Parameters):
                raise ParameterError("robot", self.robot, "a RobotModel.Parameters")
            check_positive("hardware_period", self.hardware_period)
            for name in ("lag_time_constant", "latency", "acceleration_filter_time_constant",
                         "joint_position_noise", "joint_velocity_noise", "imu_angular_velocity_noise",
                         "imu_linear_acceleration_noise"):
                check_nonnegative(name, getattr(self, name))
            for name in ("contact_height", "landing_height", "zmp_clip_tolerance"):
                check_positive(name, getattr(self, name))
            if self.landing_height > self.contact_height:
                raise ParameterError("landing_height", self.landing_height,
                                     f"at most contact_height = {self.contact_height} m")
            check_nonnegative("acceleration_window", self.acceleration_window)
            for name in ("sole_front", "sole_back", "sole_left", "sole_right"):
                check_nonnegative(name, getattr(self, name))
            if self.sole_given and self.sole_front + self.sole_back <= 0.0:
                raise ParameterError("sole_front", self.sole_front, "sole_front + sole_back > 0 [m]")
            if self.sole_given and self.sole_left + self.sole_right <= 0.0:
                raise ParameterError("sole_left", self.sole_left, "sole_left + sole_right > 0 [m]")
            check_positive("fall_tilt", self.fall_tilt)
            check_int_range("seed", self.seed, 0)
            if not isinstance(self.imu_frame, str):
                raise ParameterError("imu_frame", self.imu_frame, "a frame name or ''")
            object.__setattr__(self, "initial_joint_names", tuple(self.initial_joint_names))
            positions = tuple(float(v) for v in self.initial_joint_positions)
            object.__setattr__(self, "initial_joint_positions", positions)
            if len(positions) != len(self.initial_joint_names):
                expected = f"{len(self.initial_joint_names)} values, one per initial_joint_names entry"
                raise ParameterError("initial_joint_positions", positions, expected)
            if not all(math.isfinite(v) for v in positions):
                raise ParameterError("initial_joint_positions", positions, "finite numbers")

        @property
        def sole_given(self) -> bool:
            """Whether the sole extents are given here (not all four 0)."""
            return any((self.sole_front, self.sole_back, self.sole_left, self.sole_right))

    def __init__(self, params: KinematicSim.Parameters | None = None,
                 robot: RobotModel | None = None) -> None:
        """Load the model and reset to the initial configuration.

        Args:
            params: Configuration (defaults: Talos).
            robot: An already loaded model matching ``params.robot`` (loaded here if None).

        Raises:
            ModelError: The robot is not a biped, has multi-DoF joints, or cannot be loaded.
            FrameNotFound: ``imu_frame`` is not a frame of the model.
            JointNotFound: An initial joint is not in the model.
        """
        params = params if params is not None else KinematicSim.Parameters()
        self.robot = robot if robot is not None else RobotModel(params.robot)
        if not self.robot.is_biped:
            raise ModelError(f"the kinematic plant simulates bipeds; '{self.robot.name}' has no left/right "
                             "foot frames")
        model = self.robot.model
        if model.nq != model.nv + 1 or any(model.joints[j].nq != 1 for j in range(2, model.njoints)):
            raise ModelError(f"the kinematic plant needs one-DoF joints; '{self.robot.name}' has others "
                             "(continuous wheels: use the wheel plant)")
        self.params = p = with_robot_defaults(params, self.robot)
        self.model = model
        self.data = model.createData()
        self._foot_ids = [self.robot.frame_id(f) for f in self.robot.foot_frames]
        self._base_id = self.robot.frame_id(self.robot.base_frame)
        self._imu_frame = p.imu_frame
        self._imu_id = self.robot.frame_id(self._imu_frame)
        self._mass = self.robot.mass
        self._servo = JointServo(self.robot.joint_names, p.lag_time_constant, p.latency,
                                 self.robot.lower_limits(), self.robot.upper_limits())
        # Sole corners in the sole frame (x forward, y left), in CORNERS order.
        self._corners = np.array([[p.sole_front, p.sole_left], [p.sole_front, -p.sole_right],
                                  [-p.sole_back, p.sole_left], [-p.sole_back, -p.sole_right]])
        self._sole_centre = np.array([(p.sole_front - p.sole_back) / 2, (p.sole_left - p.sole_right) / 2])
        self._initial = initial_configuration(self.robot, p)
        self.reset()

    # ----------------------------------------------------------------- interface
    @property
    def joint_names(self) -> tuple[str, ...]:
        """Actuated joints in model order."""
        return self.robot.joint_names

    @property
    def contact_names(self) -> tuple[str, ...]:
        """Contact sensors: the four sole corners of the left foot, then of the right foot."""
        return CONTACT_NAMES

    @property
    def hardware_period(self) -> float:
        """Default step [s]."""
        return self.params.hardware_period

    def initial_configuration(self) -> np.ndarray:
        """Configuration used by :meth:`reset` without argument (before placing the base on the ground)."""
        return self._initial.copy()

    def reset(self, q0: np.ndarray | None = None) -> None:
        """Back to time 0 at rest with joints at ``q0``'s, the lowest foot flat on the ground.

        The base pose of ``q0`` only decides which foot is lowest and the robot's heading; the base is
        then placed so that this foot lies flat at z = 0 (with its x, y and yaw), and the other foot is
        in contact if its sole is within ``contact_height`` of the ground.

        Raises:
            ShapeError, InputError: ``q0`` is not a valid configuration.
        """
        q0 = self._initial.copy() if q0 is None else self.robot.check_configuration(q0, "q0")
        joints = np.clip(q0[7:], self.robot.lower_limits(), self.robot.upper_limits())
        self._servo.reset(joints, 0.0)
        self._rng = np.random.default_rng(self.params.seed)
        in_root = self._feet_in_root(joints)
        base_given = pin.XYZQUATToSE3(q0[0:7])
        world = [base_given * f for f in in_root]
        lowest = int(np.argmin([w.translation[2] for w in world]))
        self._anchors: list[pin.SE3 | None] = [None, None]
        self._anchors[lowest] = _flatten(world[lowest])
        self._swing_height: float | None = None  # sole height [m] of the free foot at the previous step
        other = 1 - lowest
        foot = self._anchors[lowest] * in_root[lowest].inverse() * in_root[other]
        if foot.translation[2] <= self.params.contact_height:
            self._anchors[other] = _flatten(foot)  # standing on both feet, flat on the ground
        base = self._place_base(in_root)  # as every step will place it
        self._time = 0.0
        self._steps = 0
        self._clip_count = 0
        self._fallen = False
        q = np.concatenate((pin.SE3ToXYZQUAT(base), joints))
        self._q = q
        self._v = np.zeros(self.model.nv)
        self._com = np.array(pin.centerOfMass(self.model, self.data, q, False))
        self._com_velocity = np.zeros(3)
        self._com_acc = np.zeros(3)
        window = max(1, round(self.params.acceleration_window / self.params.hardware_period))
        # (mid-step time [s], CoM velocity [m/s]) of the last window + 1 steps; at rest before time 0.
        self._velocities = collections.deque([(-0.5 * self.params.hardware_period, np.zeros(3))],
                                             maxlen=window + 1)
        pin.updateFramePlacements(self.model, self.data)
        imu = self.data.oMf[self._imu_id]
        self._imu_position = imu.translation.copy()
        self._imu_rotation = imu.rotation.copy()
        self._imu_velocity = np.zeros(3)
        self._finish(q, self._v, np.zeros(self.model.nv), np.zeros(3), np.zeros(3), np.zeros(3))

    def step(self, dt: float | None = None) -> SimState:
        """Advance by ``dt`` [s] (default: the hardware period).

        Raises:
            InputError: If ``dt`` is not a finite number > 0.
        """
        dt = check_dt(dt, self.params.hardware_period)
        time = self._time + dt
        joints, _ = self._servo.step(time)
        in_root = self._feet_in_root(joints)
        base = self._place_base(in_root)
        q = np.concatenate((pin.SE3ToXYZQUAT(base), joints))
        v = pin.difference(self.model, self._q, q) / dt
        a = (v - self._v) / dt
        com = np.array(pin.centerOfMass(self.model, self.data, q, False))
        com_velocity = (com - self._com) / dt
        self._velocities.append((self._time + 0.5 * dt, com_velocity))
        (t_old, v_old), (t_new, v_new) = self._velocities[0], self._velocities[-1]
        com_acc_raw = (v_new - v_old) / (t_new - t_old)  # mean second difference over the window
        tau_f = self.params.acceleration_filter_time_constant
        blend = 1.0 - math.exp(-dt / tau_f) if tau_f > 0.0 else 1.0
        self._com_acc = self._com_acc + blend * (com_acc_raw - self._com_acc)
        self._com, self._com_velocity = com, com_velocity
        pin.updateFramePlacements(self.model, self.data)
        imu = self.data.oMf[self._imu_id]
        imu_velocity = (imu.translation - self._imu_position) / dt
        imu_acc = (imu_velocity - self._imu_velocity) / dt
        imu_omega = pin.log3(self._imu_rotation.T @ imu.rotation) / dt
        self._imu_position, self._imu_velocity = imu.translation.copy(), imu_velocity
        self._imu_rotation = imu.rotation.copy()
        self._time, self._q, self._v = time, q, v
        self._steps += 1
        self._finish(q, v, a, imu_acc, imu_omega, self._com_acc)
        return self._state

    # ----------------------------------------------------------------- internals
    def _feet_in_root(self, joints: np.ndarray) -> list[pin.SE3]:
        """Sole placements relative to the free-flyer joint frame."""
        q = np.concatenate(([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], joints))
        pin.forwardKinematics(self.model, self.data, q)
        return [pin.updateFramePlacement(self.model, self.data, fid).copy() for fid in self._foot_ids]

    def _place_base(self, in_root: list[pin.SE3]) -> pin.SE3:
        """Base placement from the anchored feet (module docstring); updates lift-offs and landings."""
        p = self.params
        anchors = self._anchors
        if anchors[0] is not None and anchors[1] is not None:
            candidates = [anchors[i] * in_root[i].inverse() for i in (0, 1)]
            # Height of the right sole above its anchor when the left foot holds the base (> 0: the
            # commanded motion raises the right foot relative to the left one).
            rise = (candidates[0] * in_root[1]).translation[2] - anchors[1].translation[2]
            if rise > p.contact_height:
                anchors[1] = None
                self._swing_height = None
                return candidates[0]
            if rise < -p.contact_height:
                anchors[0] = None
                self._swing_height = None
                return candidates[1]
            weight = min(max(0.5 - 0.5 * rise / p.landing_height, 0.0), 1.0)
            return _interpolate(candidates[0], candidates[1], weight)
        stance = 0 if anchors[0] is not None else 1
        base = anchors[stance] * in_root[stance].inverse()
        swing = 1 - stance
        foot = base * in_root[swing]
        height, previous = foot.translation[2], self._swing_height
        self._swing_height = height
        set_down = previous is not None and 0.0 <= previous - height < p.landing_height
        if height <= p.landing_height or (height <= p.contact_height and set_down):
            anchors[swing] = _flatten(foot)
            self._swing_height = None
        return base

    def _finish(self, q, v, a, imu_acc, imu_omega, com_acc) -> None:
        """Forces, torques, sensor sample and state at configuration ``q`` (its kinematics computed here)."""
        p = self.params
        model, data = self.model, self.data
        # Kinematics at q: joint Jacobians (includes forward kinematics) and frame placements.
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        com = self._com
        feet = [data.oMf[fid] for fid in self._foot_ids]
        contact = [anchor is not None for anchor in self._anchors]
        normal_total = max(self._mass * (GRAVITY + com_acc[2]), 0.0)
        denominator = max(GRAVITY + com_acc[2], 1e-3)
        zmp = np.array([com[0] - com[2] / denominator * com_acc[0],
                        com[1] - com[2] / denominator * com_acc[1], 0.0])
        shares, cops = self._distribute(zmp[:2], contact)
        cop = np.zeros(3)
        cop[:2] = sum(s * c for s, c in zip(shares, cops))
        if np.linalg.norm(cop[:2] - zmp[:2]) > p.zmp_clip_tolerance:
            self._clip_count += 1
        forces = np.zeros(8)
        tau = pin.rnea(model, data, q, v, a).copy()
        horizontal = self._mass * com_acc[:2]
        for i, foot in enumerate(feet):
            if shares[i] <= 0.0:
                continue
            anchor = self._anchors[i] if self._anchors[i] is not None else foot
            local = anchor.rotation[:2, :2].T @ (cops[i] - anchor.translation[:2])
            forces[4 * i:4 * i + 4] = normal_total * shares[i] * self._bilinear(local)
            force = np.array([*(shares[i] * horizontal), normal_total * shares[i]])
            lever = np.array([cops[i][0], cops[i][1], 0.0]) - foot.translation
            wrench = np.concatenate((force, _cross(lever, force)))
            jacobian = pin.getFrameJacobian(model, data, self._foot_ids[i], pin.LOCAL_WORLD_ALIGNED)
            tau -= jacobian.T @ wrench
        base_rotation = pin.Quaternion(q[3:7]).toRotationMatrix()
        tilt = math.acos(max(-1.0, min(1.0, float(base_rotation[2, 2]))))
        self._fallen = self._fallen or tilt > p.fall_tilt
        imu = data.oMf[self._imu_id]
        imu_quat = pin.Quaternion(imu.rotation).normalized()
        acc_reading = imu.rotation.T @ (imu_acc - _GRAVITY_VECTOR)
        gyro = np.array(imu_omega, dtype=float)
        joint_pos, joint_vel, gyro, acc_reading = add_sensor_noise(
            p, self._rng, q[7:].copy(), v[6:].copy(), gyro, acc_reading)
        base = data.oMf[self._base_id]
        root_rotation = base_rotation
        base_linear = root_rotation @ v[0:3]
        base_angular = root_rotation @ v[3:6]
        if self._base_id != 0 and model.frames[self._base_id].parentJoint == 1:
            offset = base.translation - q[0:3]
            base_linear = base_linear + _cross(base_angular, offset)
        base_quat = pin.Quaternion(base.rotation).normalized()
        self._sample = SensorSample(
            time=self._time,
            joint_names=self.joint_names,
            joint_pos=joint_pos,
            joint_vel=joint_vel,
            motor_names=self.joint_names,
            motor_pos=joint_pos,
            motor_vel=joint_vel,
            motor_torque=tau[6:],
            contact_names=CONTACT_NAMES,
            contact=forces,
            imu_names=(self._imu_frame,),
            imu_orientation_xyzw=np.array([imu_quat.coeffs()]),
            imu_angular_vel=gyro[None, :],
            imu_linear_acc=acc_reading[None, :],
            base_estimate_valid=True,
            base_position=base.translation.copy(),
            base_orientation_xyzw=np.array(base_quat.coeffs()),
            base_linear_velocity=base_linear,
            base_angular_velocity=base_angular,
        )
        self._state = SimState(
            time=self._time, step_count=self._steps, q=q, v=v, com=com, zmp=zmp, cop=cop,
            contact_bodies=tuple(self.robot.foot_frames), in_contact=tuple(contact),
            zmp_clip_count=self._clip_count, fallen=self._fallen,
        )

    def _sole(self, i: int) -> pin.SE3:
        anchor = self._anchors[i]
        return anchor if anchor is not None else self.data.oMf[self._foot_ids[i]]

    def _clip_into_sole(self, point: np.ndarray, i: int) -> np.ndarray:
        """``point`` (world xy [m]) clipped into the sole rectangle of foot ``i``."""
        p = self.params
        sole = self._sole(i)
        rotation = sole.rotation[:2, :2]
        local = rotation.T @ (point - sole.translation[:2])
        local = np.array([min(max(local[0], -p.sole_back), p.sole_front),
                          min(max(local[1], -p.sole_right), p.sole_left)])
        return sole.translation[:2] + rotation @ local

    def _centre(self, i: int) -> np.ndarray:
        sole = self._sole(i)
        return sole.translation[:2] + sole.rotation[:2, :2] @ self._sole_centre

    def _distribute(self, zmp: np.ndarray, contact: list[bool]) -> tuple[list[float], list[np.ndarray]]:
        """Share of the normal force and CoP (world xy) of each foot for the ZMP ``zmp``."""
        if contact[0] and contact[1]:
            left, right = self._centre(0), self._centre(1)
            segment = right - left
            length2 = float(segment @ segment)
            alpha = 0.0 if length2 < 1e-12 else min(max(float((zmp - left) @ segment) / length2, 0.0), 1.0)
            offset = zmp - (left + alpha * segment)
            cops = [self._clip_into_sole(left + offset, 0), self._clip_into_sole(right + offset, 1)]
            return [1.0 - alpha, alpha], cops
        stance = 0 if contact[0] else 1
        shares = [0.0, 0.0]
        shares[stance] = 1.0
        cops = [np.zeros(2), np.zeros(2)]
        cops[stance] = self._clip_into_sole(zmp, stance)
        return shares, cops

    def _bilinear(self, local: np.ndarray) -> np.ndarray:
        """Weights of the four sole corners (CORNERS order) whose weighted mean is ``local`` (sole xy)."""
        p = self.params
        sx = (local[0] + p.sole_back) / (p.sole_front + p.sole_back)
        sy = (local[1] + p.sole_right) / (p.sole_left + p.sole_right)
        sx, sy = min(max(sx, 0.0), 1.0), min(max(sy, 0.0), 1.0)
        return np.array([sx * sy, sx * (1 - sy), (1 - sx) * sy, (1 - sx) * (1 - sy)])

    def corner_positions(self) -> dict[str, np.ndarray]:
        """World position [m] of each contact sensor (sole corners of the current foot poses)."""
        out = {}
        for i, foot in enumerate(FEET):
            sole = self._sole(i)
            for corner, local in zip(CORNERS, self._corners):
                out[f"{foot}_{corner}"] = sole.translation + sole.rotation @ np.array([*local, 0.0])
        return out


def initial_configuration(robot: RobotModel, params: KinematicSim.Parameters) -> np.ndarray:
    """``robot``'s reference configuration with the joints of ``params.initial_joint_names`` moved.

    Raises:
        JointNotFound: An initial joint is not in the model.
    """
    q0 = robot.reference_configuration()
    if params.initial_joint_names:
        positions = dict(zip(params.initial_joint_names, params.initial_joint_positions))
        q0 = robot.configuration_from_joints(positions, q0[0:3], q0[3:7], default=q0)
    return q0


def add_sensor_noise(params: KinematicSim.Parameters, rng: np.random.Generator, joint_pos: np.ndarray,
                     joint_vel: np.ndarray, gyro: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, ...]:
    """Readings plus the white noise of ``params`` (zero-mean Gaussian, standard deviations in ``params``).

    Draws from ``rng`` in a fixed order (joint positions, joint velocities, gyro, accelerometer), each
    only when its standard deviation is > 0, so a seed reproduces a run.

    Returns:
        Joint positions [rad], joint velocities [rad/s], angular velocity [rad/s], linear acceleration
        [m/s^2]: new arrays where noise is added, the given ones otherwise.
    """
    n = len(joint_pos)
    if params.joint_position_noise > 0.0:
        joint_pos = joint_pos + params.joint_position_noise * rng.standard_normal(n)
    if params.joint_velocity_noise > 0.0:
        joint_vel = joint_vel + params.joint_velocity_noise * rng.standard_normal(n)
    if params.imu_angular_velocity_noise > 0.0:
        gyro = gyro + params.imu_angular_velocity_noise * rng.standard_normal(3)
    if params.imu_linear_acceleration_noise > 0.0:
        acc = acc + params.imu_linear_acceleration_noise * rng.standard_normal(3)
    return joint_pos, joint_vel, gyro, acc


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross`` of two 3-vectors, bit for bit (the same products and differences, in float64), without
    its generic machinery (a third of a step's time)."""
    a0, a1, a2 = a.tolist()
    b0, b1, b2 = b.tolist()
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


def _flatten(placement: pin.SE3) -> pin.SE3:
    """``placement`` on the ground: z = 0, roll and pitch zeroed, yaw kept."""
    position = placement.translation.copy()
    position[2] = 0.0
    return pin.SE3(rotation_z(yaw_of(placement.rotation)), position)


def _interpolate(a: pin.SE3, b: pin.SE3, weight: float) -> pin.SE3:
    """Placement ``weight`` of the way from ``a`` to ``b`` (linear position, rotation on the geodesic)."""
    rotation = a.rotation @ pin.exp3(weight * pin.log3(a.rotation.T @ b.rotation))
    return pin.SE3(rotation, (1.0 - weight) * a.translation + weight * b.translation)


__all__ = ["CONTACT_NAMES", "CORNERS", "FEET", "KinematicSim", "add_sensor_noise", "initial_configuration",
           "with_robot_defaults"]
