"""MuJoCo physics backends: a biped on sole boxes (:class:`MujocoSim`) and a held wheeled robot (upkie).

Both load the robot's URDF without meshes, or its MJCF (:mod:`walk_mpc.core.sim.mjcf`), and step MuJoCo at
``timestep`` (1 kHz, implicitfast) ``hardware_period / timestep`` times per :meth:`step`. Joints are
position-servoed by MuJoCo position actuators (PD gains per joint group, see
:class:`MujocoSim.Parameters`) whose targets are the output of a
:class:`~walk_mpc.core.sim.backend.JointServo` (ros2_control trajectory semantics, ``latency`` of the
kinematic plant's parameters, no lag: the PD and the inertia are the lag), interpolated linearly over
the physics steps of a hardware step.

**Biped** (:class:`MujocoSim`, e.g. Talos): free-floating base, a floor plane, one box per sole in
the ankle body (bottom face on the sole frame, extents ``sole_front/back/left/right`` of the kinematic
plant, ``sole_thickness`` thick); the soles collide with the ground, and (``leg_collisions``, on by default,
for a robot whose description names its ``leg_links``) the left leg's URDF collision meshes with the right
leg's, recorded in :attr:`MujocoSim.leg_contacts`. Optional gravity
feed-forward written to ``qfrc_applied`` at every physics step: ``tau = g(q) - J_c^T f`` with ``f`` the
least-norm wrench of the feet in contact that balances the floating-base rows of ``g(q)`` (pinocchio on the
same URDF). Sensors follow the kinematic plant exactly (names, order, conventions): joint positions and
velocities, motor torque (actuator force plus feed-forward), IMU at ``imu_frame`` (orientation,
angular velocity in the IMU frame, accelerometer ``a - g`` reading ``(0, 0, +g)`` at rest), four
contact sensors per sole (``left_foot_fl`` ...): the sole's normal force (``mj_contactForce`` over its
box's contacts) spread on its corners with the bilinear weights of its centre of pressure, so the
force-weighted mean of the corners is the CoP; base pose and twist ground truth.
:attr:`SimState.zmp` and :attr:`SimState.cop` are both the CoP of all the contact forces (physics has
no ZMP clipping: ``zmp_clip_count`` stays 0). The robot has fallen (latched until reset) when the base
is below ``fall_height_ratio`` of its height after reset or tilts more than ``fall_tilt``.

**Point feet** (:class:`MujocoSim` with a multi-legged robot, e.g. solo12): one contact sphere per foot
centred on its foot frame (``foot_radius`` of the robot description, 1 cm if none), feet on the ground at
reset, one contact sensor per foot (the description's ``contact_sensors``, e.g. ``FL_FOOT``) reading its
normal force; the gravity feed-forward balances the base with point forces (least squares: two feet or
fewer cannot hold every moment).

Gains, torque limits and rotor inertias come from the robot description's joint groups
(``config/robots/<name>.yaml``); :class:`MujocoSim.Parameters` ``gain_patterns`` override them (tuning) and
``kp`` / ``kd`` serve the joints no group covers.

**Wheeled** (:class:`MujocoWheelSim`, e.g. upkie): wheel joints continuous, only the tire cylinders
collide; the base slides along world x and z without rotating (an unbalanced wheeled biped would
pitch over), so the wheels carry its weight and roll it. The wheels follow a scripted velocity
``wheel_velocity_amplitude sin(2 pi t / wheel_velocity_period)`` (velocity servos, torque limited to
the URDF efforts); the legs track position commands. The lift scenario of
:class:`~walk_mpc.core.sim.wheels.WheelPlant` (``ground``, ``air``, ``touchdown`` seconds, repeated)
applies a vertical force on the base during ``air`` (``xfrc_applied``: weight compensation plus a
critically damped spring to ``lift_height`` above the standing height): on the ground the wheel torque
accelerates the whole robot, lifted the wheels spin freely, as a wheel contact observer expects.

Deterministic: same parameters and commands, same samples. MuJoCo errors are re-raised as
:class:`~walk_mpc.core.errors.ModelError`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.errors import InputError, ModelError, ParameterError, ShapeError
from walk_mpc.core.params import check_choice, check_int_range, check_nonnegative, check_positive, check_range
from walk_mpc.core.sim import mjcf
from walk_mpc.core.sim.backend import (
    GRAVITY,
    JointServo,
    ScriptedWheelsBackend,
    SensorSample,
    ServoedBackend,
    SimState,
    check_dt,
)
from walk_mpc.core.sim.kinematic import (
    CONTACT_NAMES,
    CORNERS,
    FEET,
    KinematicSim,
    add_sensor_noise,
    initial_configuration,
    with_robot_defaults,
)
from walk_mpc.core.sim.wheels import WheelPlant, upkie_urdf

#: Integrators of ``MujocoSim.Parameters.integrator``.
INTEGRATORS = ("euler", "implicit", "implicitfast", "rk4")


def _wxyz(rotation: np.ndarray) -> list[float]:
    x, y, z, w = pin.Quaternion(np.asarray(rotation)).normalized().coeffs()
    return [float(w), float(x), float(y), float(z)]


#: Collision bits of the leg geoms (``leg_collisions``): left (contype, conaffinity), right; each leg collides
#: only with the other (the floor, terrain and soles have MuJoCo's default bit 1).
LEFT_LEG_BITS, RIGHT_LEG_BITS = (2, 4), (4, 2)
#: Collision bits of the leg geoms with ``leg_clearance`` alone: a contype no conaffinity has (a geom with
#: both 0 would be discarded as visual), so they collide with nothing.
NO_COLLISION_BITS = (8, 0)


@dataclasses.dataclass(frozen=True)
class LegContacts:
    """Left-right leg contacts of a run (:attr:`MujocoSim.leg_contacts`, ``leg_collisions`` on).

    Attributes:
        steps: Physics steps with at least one left-right leg contact.
        first_time: Time [s] of the first such step (nan: none).
        last_time: Time [s] of the last one (nan: none).
        max_force: Largest sum of the left-right contacts' normal forces in one physics step [N].
        max_force_time: Its time [s] (nan: none).
        max_penetration: Deepest left-right penetration [m] (0: none deeper than touching).
        pairs: The (left link, right link) pairs that touched, sorted.
    """

    steps: int = 0
    first_time: float = math.nan
    last_time: float = math.nan
    max_force: float = 0.0
    max_force_time: float = math.nan
    max_penetration: float = 0.0
    pairs: tuple[tuple[str, str], ...] = ()

    @property
    def touched(self) -> bool:
        """Whether the legs touched."""
        return self.steps > 0

    def summary(self) -> str:
        """One line: "none" or the steps, times, largest force and the pairs."""
        if not self.touched:
            return "none"
        pairs = ", ".join(f"{a}/{b}" for a, b in self.pairs)
        return (f"{self.steps} physics steps in {self.first_time:.3f}-{self.last_time:.3f} s, max "
                f"{self.max_force:.0f} N at {self.max_force_time:.3f} s, depth "
                f"{1000 * self.max_penetration:.1f} mm ({pairs})")


#: Farthest left-right leg distance [m] :attr:`MujocoSim.leg_clearance` resolves (farther reads as this).
CLEARANCE_RANGE = 0.1


@dataclasses.dataclass(frozen=True)
class LegClearance:
    """Left-right leg distances of a run, once per hardware step (:attr:`MujocoSim.leg_clearance`).

    Attributes:
        min_distance: Smallest distance between a left-leg and a right-leg geom [m] (negative: they
            interpenetrate by that much; :data:`CLEARANCE_RANGE` when never closer).
        min_time: Its time [s] (nan: never closer than the range).
        min_pair: Its (left link, right link).
        overlap_steps: Hardware steps with a negative distance.
        first_overlap: Time [s] of the first of them (nan: none).
        last_overlap: Time [s] of the last (nan: none).
    """

    min_distance: float = CLEARANCE_RANGE
    min_time: float = math.nan
    min_pair: tuple[str, str] = ("", "")
    overlap_steps: int = 0
    first_overlap: float = math.nan
    last_overlap: float = math.nan

    def summary(self) -> str:
        """One line: the smallest distance, when, between which links, and the overlap."""
        if math.isnan(self.min_time):
            return f"farther than {100 * CLEARANCE_RANGE:.0f} cm"
        text = (f"min {100 * self.min_distance:.1f} cm at {self.min_time:.2f} s "
                f"({self.min_pair[0]}/{self.min_pair[1]})")
        if self.overlap_steps:
            text += (f", overlap in {self.overlap_steps} steps "
                     f"{self.first_overlap:.2f}-{self.last_overlap:.2f} s")
        return text


class _MujocoBackend(ServoedBackend):
    """Shared machinery: model, servo, stepping with interpolated targets, IMU and joint readings."""

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """MuJoCo backend configuration (the robot, hardware period and servo latency come from the
        kinematic plant's or the wheel plant's parameters).

        Attributes:
            timestep: Physics step [s]; the hardware period must be a multiple of it.
            integrator: ``"implicitfast"`` (default), ``"implicit"``, ``"euler"`` or ``"rk4"``.
            kp: Proportional gain of the joint position servos [N m/rad] of the joints that neither
                ``gain_patterns`` nor the robot description's joint groups (``joint_groups``,
                ``servo_default`` of ``config/robots/<name>.yaml``) give gains.
            kd: Their derivative gain [N m s/rad].
            gain_patterns: Joint name substrings with their own gains (first match wins), before the robot
                description's groups (tuning; the robot's gains belong in its description).
            gain_kp: Proportional gain of each pattern [N m/rad].
            gain_kd: Derivative gain of each pattern [N m s/rad].
            armature: Rotor inertia added to every actuated joint [kg m^2], on top of its joint group's
                (robot description).
            effort_limits: Clip actuator torques to the URDF effort limits.
            velocity_feedforward: Servo the joint velocity to the setpoint's velocity (the slope of the
                interpolated targets over the hardware step): torque ``kp (q* - q) + kd (v* - v)``
                instead of ``kp (q* - q) - kd v`` (no lag of ``kd / kp`` behind a moving target).
            gravity_feedforward: Add ``g(q) - J_c^T f`` to the joint torques (bipeds).
            feedforward_substeps: Physics steps between two updates of the feed-forward (1 = every
                step; the torques are held in between).
            sole_thickness: Thickness of the sole contact boxes [m] (bottom face on the sole frame).
            friction: Sliding friction coefficient of the contacts.
            contact_time_constant: Time constant of the soft contacts [s] (MuJoCo ``solref``; MuJoCo
                uses at least twice the timestep): smaller is stiffer. 5 ms (MuJoCo's default is 20 ms)
                keeps a loaded Talos sole within 0.1 mm of the floor instead of 0.7-1.5 mm, so it
                does not rock 0.5 degrees under a moving centre of pressure.
            contact_damping_ratio: Damping ratio of the soft contacts (MuJoCo ``solref``).
            fall_height_ratio: Fallen when the base height drops below this fraction of its height
                after reset.
            wheel_kd: Gain of the wheel velocity servos [N m s/rad].
            wheel_velocity_amplitude: Amplitude of the scripted wheel velocity [rad/s].
            wheel_velocity_period: Period of the scripted wheel velocity [s].
            lift_height: Height [m] the base is lifted to during the wheel plant's ``air`` windows.
            lift_frequency: Natural frequency of the lifting spring [Hz] (critically damped).
            base_damping: Viscous damping of the wheeled robot's base slides [N s/m].
            leg_collisions: Biped (URDF): collide the left leg with the right leg, through the URDF's own
                ``<collision>`` geometry of the links the robot description's ``leg_links`` names (meshes:
                their convex hulls), massless; left-leg geoms collide only with right-leg geoms (never
                with the floor, the terrain, the soles or their own leg). Recorded per run in
                :attr:`MujocoSim.leg_contacts` (simulator truth: for benchmarks and tests, not the
                controllers). On by default: a robot whose description names no ``leg_links`` has nothing
                to collide (only its soles collide, as before); off, the model as before (legs pass
                through each other: crossing steps look feasible that are not).
            leg_clearance: Biped (URDF): the same leg geoms (without collisions unless ``leg_collisions``),
                and after every hardware step the smallest left-right distance between them (MuJoCo
                ``mj_geomDistance``, negative: the legs pass through each other), recorded in
                :attr:`MujocoSim.leg_clearance` (simulator truth, like :attr:`MujocoSim.leg_contacts`).
                Without ``leg_collisions`` the physics is unchanged (massless geoms colliding with nothing).
        """

        timestep: float = 0.001
        integrator: str = "implicitfast"
        kp: float = 2000.0
        kd: float = 20.0
        gain_patterns: tuple[str, ...] = ()
        gain_kp: tuple[float, ...] = ()
        gain_kd: tuple[float, ...] = ()
        armature: float = 0.0
        effort_limits: bool = True
        velocity_feedforward: bool = False
        gravity_feedforward: bool = True
        feedforward_substeps: int = 1
        sole_thickness: float = 0.02
        friction: float = 1.0
        contact_time_constant: float = 0.005
        contact_damping_ratio: float = 1.0
        fall_height_ratio: float = 0.9
        wheel_kd: float = 0.1
        wheel_velocity_amplitude: float = 10.0
        wheel_velocity_period: float = 1.0
        lift_height: float = 0.1
        lift_frequency: float = 3.0
        base_damping: float = 0.0
        leg_collisions: bool = True
        leg_clearance: bool = False

        def __post_init__(self) -> None:
            check_positive("timestep", self.timestep)
            check_choice("integrator", self.integrator, INTEGRATORS)
            for name in ("kp", "kd", "armature", "friction", "wheel_kd", "wheel_velocity_amplitude",
                         "lift_height", "base_damping"):
                check_nonnegative(name, getattr(self, name))
            for name in ("sole_thickness", "wheel_velocity_period", "lift_frequency", "contact_time_constant",
                         "contact_damping_ratio"):
                check_positive(name, getattr(self, name))
            check_positive("contact_time_constant", self.contact_time_constant)
            check_int_range("feedforward_substeps", self.feedforward_substeps, 1)
            check_range("fall_height_ratio", self.fall_height_ratio, 0.0, 1.0)
            for name in ("effort_limits", "velocity_feedforward", "gravity_feedforward", "leg_collisions",
                         "leg_clearance"):
                if not isinstance(getattr(self, name), bool):
                    raise ParameterError(name, getattr(self, name), "true or false")
            patterns = tuple(self.gain_patterns)
            if not all(isinstance(s, str) and s for s in patterns):
                raise ParameterError("gain_patterns", patterns, "non-empty joint name substrings")
            object.__setattr__(self, "gain_patterns", patterns)
            for name in ("gain_kp", "gain_kd"):
                values = tuple(float(v) for v in getattr(self, name))
                object.__setattr__(self, name, values)
                if len(values) != len(patterns):
                    raise ParameterError(name, values, f"{len(patterns)} values, one per gain_patterns entry")
                if not all(math.isfinite(v) and v >= 0.0 for v in values):
                    raise ParameterError(name, values, "finite numbers >= 0")

        def gains(self, joint: str, robot: RobotModel | None = None) -> tuple[float, float]:
            """(kp [N m/rad], kd [N m s/rad]) of ``joint``: its first matching pattern's, else its group's in
            ``robot``'s description, else the default."""
            for pattern, kp, kd in zip(self.gain_patterns, self.gain_kp, self.gain_kd):
                if pattern in joint:
                    return kp, kd
            described = robot.servo_gains(joint) if robot is not None else None
            return (described[0], described[1]) if described is not None else (self.kp, self.kd)

    # ------------------------------------------------------------------ construction helpers
    def _init_common(self, spec, robot: RobotModel, hardware_period: float, servoed: tuple[str, ...],
                     latency: float) -> None:
        """Finish ``spec`` (options, IMU sensors), compile it and index joints and actuators."""
        mj = mjcf.require_mujoco()
        self._mj = mj
        opt = self.mujoco_params
        spec.option.timestep = opt.timestep
        spec.option.integrator = getattr(mj.mjtIntegrator, f"mjINT_{opt.integrator.upper()}")
        for name, kind in (("imu_acc", "ACCELEROMETER"), ("imu_gyro", "GYRO"), ("imu_quat", "FRAMEQUAT")):
            spec.add_sensor(name=name, type=getattr(mj.mjtSensor, f"mjSENS_{kind}"),
                            objtype=mj.mjtObj.mjOBJ_SITE, objname="imu")
        self.model = mjcf.compile_spec(spec)
        self.data = mj.MjData(self.model)
        m = self.model
        steps = hardware_period / opt.timestep
        if abs(steps - round(steps)) > 1e-6 * steps or round(steps) < 1:
            raise ParameterError("timestep", opt.timestep,
                                 f"a divisor of the hardware period {hardware_period!r} s")
        self._hardware_period = float(hardware_period)
        self._substeps = int(round(steps))
        self._qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in robot.joint_names])
        self._dadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in robot.joint_names])
        self._servoed = servoed
        self._servo_actuators = np.array([m.actuator(n).id for n in servoed], dtype=int)
        self._servo_dofs = np.array([m.jnt_dofadr[m.joint(n).id] for n in servoed], dtype=int)
        lower = np.array([robot.model.lowerPositionLimit[robot.joint_index_q(n)] for n in servoed])
        upper = np.array([robot.model.upperPositionLimit[robot.joint_index_q(n)] for n in servoed])
        unlimited = lower >= upper  # URDF joints without limits
        lower[unlimited], upper[unlimited] = -np.inf, np.inf
        self._servo = JointServo(servoed, 0.0, latency, lower, upper)
        # Velocity feed-forward as a target offset: kp (q* + (kd / kp) v* - q) - kd v.
        ratio = [kd / kp if kp > 0.0 else 0.0 for kp, kd in (opt.gains(n, robot) for n in servoed)]
        self._velocity_ratio = np.array(ratio) if opt.velocity_feedforward else None
        self._actuator_of_joint = np.array([m.actuator(n).id for n in robot.joint_names], dtype=int)
        self._imu_site = m.site("imu").id
        self._base_site = m.site("base").id
        self._sensor = {name: (m.sensor_adr[m.sensor(name).id], m.sensor_dim[m.sensor(name).id])
                        for name in ("imu_acc", "imu_gyro", "imu_quat")}

    @staticmethod
    def _add_frame_site(spec, robot: RobotModel, root_name: str, frame: str, site: str) -> str:
        """A site at pinocchio frame ``frame`` in its MuJoCo body; returns the body name."""
        f = robot.model.frames[robot.frame_id(frame)]
        body = root_name if f.parentJoint <= 1 else robot.model.names[f.parentJoint]
        if f.parentJoint > 1:
            joint = spec.joint(body)
            if joint is None:
                raise ModelError(f"joint '{body}' of frame '{frame}' is not in the MuJoCo model")
            body = joint.parent.name
        placement = _MujocoBackend._frame_in_body(robot, frame, body)
        mjcf.add_site(spec, body, site, placement.translation, _wxyz(placement.rotation))
        return body

    @staticmethod
    def _frame_in_body(robot: RobotModel, frame: str, body: str) -> pin.SE3:
        """Placement of pinocchio frame ``frame`` in MuJoCo body ``body`` (on the same joint).

        The body's frame is pinocchio's body frame of that name when it has one on that joint (an MJCF
        joint may sit away from its body's origin), else the joint frame (URDF: the joint's child link).
        """
        model = robot.model
        f = model.frames[robot.frame_id(frame)]
        if body in robot.frame_names:
            b = model.frames[robot.frame_id(body)]
            if b.type == pin.FrameType.BODY and b.parentJoint == f.parentJoint:
                return b.placement.actInv(f.placement)
        return f.placement

    @staticmethod
    def _add_servos(spec, names, opt: _MujocoBackend.Parameters, robot: RobotModel | None = None) -> None:
        """Position servos on ``names`` with their gains (:meth:`Parameters.gains`); torques clipped to the
        robot description's group limit, else the URDF effort (``effort_limits``)."""
        for name in names:
            joint = spec.joint(name)
            group = robot.servo_group(name) if robot is not None else None
            joint.armature = opt.armature + (group.armature if group is not None else 0.0)
            described = robot.servo_gains(name) if robot is not None else None
            if not opt.effort_limits:
                joint.actfrclimited = 0  # mjLIMITED_FALSE
            elif described is not None and described[2] > 0.0:
                joint.actfrclimited = 1  # mjLIMITED_TRUE
                joint.actfrcrange = [-described[2], described[2]]
            kp, kd = opt.gains(name, robot)
            mjcf.add_position_actuator(spec, name, kp, kd)

    # ------------------------------------------------------------------ interface
    @property
    def hardware_period(self) -> float:
        """Default step [s] (sensor period)."""
        return self._hardware_period

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every actuated joint, in the robot model's order (the order of the samples)."""
        return self.robot.joint_names

    @property
    def substeps(self) -> int:
        """Physics steps per hardware period."""
        return self._substeps

    def _substep_count(self, dt: float) -> int:
        steps = dt / self.mujoco_params.timestep
        n = int(round(steps))
        if n < 1 or abs(steps - n) > 1e-6 * steps:
            timestep = self.mujoco_params.timestep
            raise InputError("dt", dt, f"a multiple of the physics timestep {timestep!r} s")
        return n

    def _advance(self, dt: float | None) -> None:
        """Step physics by ``dt`` with servo targets interpolated over the physics steps."""
        dt = check_dt(dt, self._hardware_period)
        n = self._substep_count(dt)
        time = self._time + dt
        target, _ = self._servo.step(time)
        start = self._target
        mj, m, d = self._mj, self.model, self.data
        h = self.mujoco_params.timestep
        offset = 0.0 if self._velocity_ratio is None else self._velocity_ratio * ((target - start) / dt)
        for k in range(1, n + 1):
            d.ctrl[self._servo_actuators] = start + (k / n) * (target - start) + offset
            self._before_physics_step(self._time + (k - 1) * h)
            mj.mj_step(m, d)
            self._physics_steps += 1
            self._after_physics_step(self._time + (k - 1) * h)
        mj.mj_forward(m, d)  # positions, contacts and sensors of the new state (mj_step leaves the old)
        self._target = target
        self._time = time
        self._steps += 1

    def _before_physics_step(self, time: float) -> None:
        """Hook run before each physics step (feed-forward, scripted forces)."""
        wrench = self.data.xfrc_applied[self._root_body]
        force = self._base_force
        wrench[0:3] = force
        # xfrc_applied acts at the body's centre of mass: the force at the body's origin adds r x F.
        wrench[3:6] = np.cross(self._root_origin_from_com(), force) if force.any() else 0.0

    def _after_physics_step(self, time: float) -> None:
        """Hook run after each physics step (its contacts are those of the state at ``time``)."""

    def _root_origin_from_com(self) -> np.ndarray:
        """Root body origin minus root body centre of mass [m], world frame, at the current ``qpos``.

        ``xpos - xipos`` of the last kinematics pass would lag a physics step behind ``qpos``: a free root
        body's orientation is its joint's quaternion (MuJoCo's free-joint convention), any other root's
        orientation never changes (slides, fixed).
        """
        m, d = self.model, self.data
        rotation = np.empty(9)
        joint = m.body_jntadr[self._root_body]
        if joint >= 0 and m.jnt_type[joint] == self._mj.mjtJoint.mjJNT_FREE:
            quat = d.qpos[m.jnt_qposadr[joint] + 3:m.jnt_qposadr[joint] + 7]
            self._mj.mju_quat2Mat(rotation, quat / np.linalg.norm(quat))
        else:
            rotation[:] = d.xmat[self._root_body]
        return -rotation.reshape(3, 3) @ m.body_ipos[self._root_body]

    def set_base_force(self, force_in_world: np.ndarray) -> None:
        """Apply ``force_in_world`` [N] at the base body's origin until changed (pushes, disturbances).

        The base body is the model's root body (its origin is the URDF root link's frame); MuJoCo's
        ``xfrc_applied`` acts at a body's centre of mass, so the force is written there together with its
        moment about that centre, ``(origin - com) x force``. Cleared by :meth:`reset`; the wheeled robot's
        lift force overrides its z component (its base only translates: the moment has no effect there).

        Raises:
            ShapeError, InputError: Not three finite numbers.
        """
        force = np.asarray(force_in_world, dtype=float)
        if force.shape != (3,):
            raise ShapeError("force_in_world", force.shape, (3,))
        if not np.all(np.isfinite(force)):
            raise InputError("force_in_world", force, "finite values [N]")
        self._base_force = force.copy()

    def _reset_common(self, qpos: np.ndarray, servo_positions: np.ndarray) -> None:
        mj, m, d = self._mj, self.model, self.data
        mj.mj_resetData(m, d)
        d.qpos[:] = qpos
        self._servo.reset(servo_positions, 0.0)
        self._target = self._servo.positions
        d.ctrl[self._servo_actuators] = self._target
        self._time = 0.0
        self._steps = 0
        self._physics_steps = 0
        self._fallen = False
        self._base_force = np.zeros(3)
        mj.mj_forward(m, d)

    def _imu(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(orientation xyzw, angular velocity [rad/s], accelerometer [m/s^2]) of the IMU site."""
        data = self.data.sensordata

        def read(name):
            adr, dim = self._sensor[name]
            return np.array(data[adr:adr + dim])

        w, x, y, z = read("imu_quat")
        return np.array([x, y, z, w]), read("imu_gyro"), read("imu_acc")

    def _base_truth(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(position, orientation xyzw, linear and angular velocity in the world) of the base frame."""
        mj, d = self._mj, self.data
        rotation = d.site_xmat[self._base_site].reshape(3, 3)
        velocity = np.zeros(6)
        mj.mj_objectVelocity(self.model, d, mj.mjtObj.mjOBJ_SITE, self._base_site, velocity, 0)
        quat = pin.Quaternion(rotation).normalized().coeffs()
        return d.site_xpos[self._base_site].copy(), np.array(quat), velocity[3:6].copy(), velocity[0:3].copy()

    def _joint_readings(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, velocities, torques) of the model's joints; torque = actuator force + applied."""
        d = self.data
        torque = d.actuator_force[self._actuator_of_joint] + d.qfrc_applied[self._dadr]
        return d.qpos[self._qadr].copy(), d.qvel[self._dadr].copy(), torque


class MujocoSim(_MujocoBackend):
    """Biped on MuJoCo physics with the kinematic plant's sensors (see the module docstring).

    Example:
        >>> sim = MujocoSim()
        >>> state = sim.step()          # 10 physics steps of 1 ms
        >>> sim.sensor_sample().contact.sum()  # ~ m g
    """

    Parameters = _MujocoBackend.Parameters

    def __init__(self, params: KinematicSim.Parameters | None = None,
                 mujoco: _MujocoBackend.Parameters | None = None, robot: RobotModel | None = None) -> None:
        """Build the MuJoCo model of ``params.robot`` and reset to the initial posture.

        Args:
            params: Plant parameters shared with the kinematic plant (robot, hardware period, latency,
                sole geometry, IMU frame, fall tilt, noise, initial posture).
            mujoco: Physics parameters (defaults if None).
            robot: An already loaded model matching ``params.robot``.

        Raises:
            ModelError: The robot is not a biped with one-DoF joints, or MuJoCo cannot load it.
            ConfigError: The ``mujoco`` package is missing.
            FrameNotFound, JointNotFound: Bad ``imu_frame`` or initial joints.
        """
        params = params if params is not None else KinematicSim.Parameters()
        self.mujoco_params = mujoco if mujoco is not None else MujocoSim.Parameters()
        self.robot = robot if robot is not None else RobotModel(params.robot)
        model = self.robot.model
        if not self.robot.foot_frames:
            raise ModelError(f"the MuJoCo legged backend needs sole or foot frames; '{self.robot.name}' "
                             "has none")
        self._point_feet = not self.robot.is_biped
        self.params = with_robot_defaults(params, self.robot)
        p, opt = self.params, self.mujoco_params
        if model.nq != model.nv + 1 or any(model.joints[j].nq != 1 for j in range(2, model.njoints)):
            raise ModelError(f"the MuJoCo biped backend needs one-DoF joints; '{self.robot.name}' has others")
        self.pin_model, self.pin_data = model, model.createData()
        if self.robot.description_format == "mjcf":  # the MJCF as it is (its own free joint, if any)
            described = self.robot.description
            names = (*FEET, *self.robot.foot_frames, *(described.contact_sensors if described else ()))
            reserved = ("imu", "base", "floor", *(f"{n}_sole" for n in names), *(f"{n}_box" for n in names))
            spec = mjcf.load_mjcf_spec(self.robot.description_path, reserved_names=reserved)
            root = mjcf.root_body(spec).name if mjcf.has_free_joint(spec) else mjcf.add_base_joint(spec)
        else:
            spec = mjcf.load_urdf_spec(self.robot.urdf_path)
            root = mjcf.add_base_joint(spec, "free")
        solref = (opt.contact_time_constant, opt.contact_damping_ratio)
        mjcf.add_floor(spec, opt.friction, solref=solref)
        self._add_frame_site(spec, self.robot, root, p.imu_frame, "imu")
        self._add_frame_site(spec, self.robot, root, self.robot.base_frame, "base")
        if self._point_feet:  # one sphere per foot, its centre on the foot frame
            described = self.robot.description
            self._feet = tuple(described.contact_sensors if described is not None and
                               len(described.contact_sensors) == len(self.robot.foot_frames)
                               else self.robot.foot_frames)
            radius = described.foot_radius if described is not None and described.foot_radius > 0.0 else 0.01
            self._foot_radius = radius
            for foot, frame in zip(self._feet, self.robot.foot_frames):
                body = self._add_frame_site(spec, self.robot, root, frame, f"{foot}_sole")
                placement = self._frame_in_body(self.robot, frame, body)
                mjcf.add_sphere(spec, body, f"{foot}_box", placement.translation, radius, opt.friction,
                                solref)
        else:
            self._feet, self._foot_radius = FEET, 0.0
            half = np.array([(p.sole_front + p.sole_back) / 2, (p.sole_left + p.sole_right) / 2,
                             opt.sole_thickness / 2])
            centre = np.array([(p.sole_front - p.sole_back) / 2, (p.sole_left - p.sole_right) / 2,
                               opt.sole_thickness / 2])
            for foot, frame in zip(FEET, self.robot.foot_frames):
                body = self._add_frame_site(spec, self.robot, root, frame, f"{foot}_sole")
                placement = self._frame_in_body(self.robot, frame, body)
                mjcf.add_box(spec, body, f"{foot}_box", placement.act(centre), half,
                             _wxyz(placement.rotation), opt.friction, solref)
        d = self.robot.description
        names_legs = d is not None and d.leg_links.given  # leg_collisions: the legs its description names
        wanted = opt.leg_clearance or (opt.leg_collisions and names_legs)
        legs = self._add_leg_geoms(spec, root) if wanted else {}
        self._add_servos(spec, self.robot.joint_names, opt, self.robot)
        self._init_common(spec, self.robot, p.hardware_period, self.robot.joint_names, p.latency)
        m = self.model
        self._leg_link = {m.geom(name).id: link for name, link in legs.items()}  # leg geom id -> its link
        self._left_geoms = {m.geom(name).id for name in legs if name.startswith("leg_collision_left_")}
        #: The leg geoms colliding (``leg_collisions``; leg_clearance alone: none, they collide with nothing).
        self._leg_mask = np.zeros(m.ngeom, dtype=bool)
        self._collide_legs = bool(legs) and opt.leg_collisions
        if self._collide_legs:
            self._leg_mask[list(self._leg_link)] = True
        #: The (left, right) leg geom pairs, and whether their distance is measured every hardware step.
        self._leg_pairs = [(a, b) for a in sorted(self._left_geoms) for b in self._leg_link
                           if b not in self._left_geoms]
        self._measure_legs = opt.leg_clearance and bool(self._leg_pairs)
        self._fromto = np.zeros(6)
        self._scratch = None  # MjData of leg_distance (made on first use)
        mass = float(m.body_subtreemass[m.body(root).id])
        if self.robot.description_format == "mjcf" and abs(mass - self.robot.mass) > 0.01 * self.robot.mass:
            raise ModelError(f"MuJoCo weighs '{self.robot.description_path}' {mass:.3f} kg and pinocchio "
                             f"{self.robot.mass:.3f} kg: expected the same inertias (give the bodies "
                             "explicit <inertial> elements)")
        self._sole_geoms = {m.geom(f"{foot}_box").id: i for i, foot in enumerate(self._feet)}
        self._sole_geom_ids = [m.geom(f"{foot}_box").id for foot in self._feet]
        self._sole_sites = [m.site(f"{foot}_sole").id for foot in self._feet]
        self._foot_ids = [self.robot.frame_id(f) for f in self.robot.foot_frames]
        self._root_body = m.body(root).id
        self._wrench = np.zeros(6)
        self._initial = initial_configuration(self.robot, p)
        self.reset()

    def _add_leg_geoms(self, spec, root: str) -> dict[str, str]:
        """The URDF collision geoms of the legs (``leg_collisions``); returns geom name -> link."""
        d = self.robot.description
        if self.robot.description_format != "urdf" or self._point_feet:
            raise ModelError(f"leg_collisions needs a biped described by a URDF; '{self.robot.name}' is not")
        if d is None or not d.leg_links.given:
            raise ModelError(f"leg_collisions needs the legs' links of '{self.robot.name}': 'leg_links' "
                             "(left and right link name patterns) in its robot description")
        geoms = {}
        collide = self.mujoco_params.leg_collisions  # (leg_links given: checked above)
        left_bits, right_bits = (LEFT_LEG_BITS, RIGHT_LEG_BITS) if collide else (NO_COLLISION_BITS,) * 2
        for side, patterns, bits in (("left", d.leg_links.left, left_bits),
                                     ("right", d.leg_links.right, right_bits)):
            collisions = mjcf.urdf_collisions(self.robot.urdf_path, patterns)
            if not collisions:
                raise ModelError(f"leg_links.{side} {list(patterns)} of '{self.robot.name}' names no link "
                                 f"with a <collision> in '{self.robot.urdf_path}'")
            for k, collision in enumerate(collisions):
                link = collision["link"]
                f = self.robot.model.frames[self.robot.frame_id(link)]
                body = root
                if f.parentJoint > 1:
                    joint = spec.joint(self.robot.model.names[f.parentJoint])
                    if joint is None:
                        raise ModelError(f"joint of link '{link}' is not in the MuJoCo model")
                    body = joint.parent.name
                local = pin.SE3(pin.rpy.rpyToMatrix(*collision["rpy"]), collision["xyz"])
                placement = self._frame_in_body(self.robot, link, body) * local
                name = f"leg_collision_{side}_{k}"
                mjcf.add_collision_geom(spec, body, name, collision, placement.translation,
                                        _wxyz(placement.rotation), *bits)
                geoms[name] = link
        return geoms

    @property
    def leg_contacts(self) -> LegContacts:
        """Left-right leg contacts since the last :meth:`reset` (``leg_collisions``; none when off)."""
        r = self._leg_record
        return LegContacts(steps=r["steps"], first_time=r["first"], last_time=r["last"], max_force=r["force"],
                           max_force_time=r["force_time"], max_penetration=r["depth"],
                           pairs=tuple(sorted(r["pairs"])))

    @property
    def leg_clearance(self) -> LegClearance:
        """Smallest left-right leg distance since the last :meth:`reset` (``leg_clearance``)."""
        r = self._clearance
        return LegClearance(min_distance=r["min"], min_time=r["time"], min_pair=r["pair"],
                            overlap_steps=r["steps"], first_overlap=r["first"], last_overlap=r["last"])

    def leg_distance(self, q) -> tuple[float, tuple[str, str]]:
        """Smallest distance [m] between a left-leg and a right-leg geom at the configuration ``q`` (pinocchio
        order), and its (left link, right link): kinematics only, on a copy of the simulation's data (the
        simulation is untouched). Negative: the geoms interpenetrate by that much; :data:`CLEARANCE_RANGE`
        and ``("", "")`` when no pair is closer. For scans of postures
        (``benchmarks/crossover_clearance.py``).

        Raises:
            ModelError: The simulation has no leg geoms (``leg_clearance`` or ``leg_collisions`` off).
            ShapeError, InputError: ``q`` is not a valid configuration.
        """
        if not self._leg_link:
            raise ModelError(f"leg_distance needs the legs' geoms of '{self.robot.name}': "
                             "MujocoSim.Parameters(leg_clearance=True) or leg_collisions")
        q = self.robot.check_configuration(q, "q")
        if self._scratch is None:
            self._scratch = self._mj.MjData(self.model)
        d = self._scratch
        self._write_qpos(d.qpos, q)
        self._mj.mj_kinematics(self.model, d)
        distance, pair = self._closest(d, self._leg_pairs)
        return distance, (("", "") if pair is None else (self._leg_link[pair[0]], self._leg_link[pair[1]]))

    def _closest(self, d, pairs) -> tuple[float, tuple[int, int] | None]:
        """The smallest geom distance of ``pairs`` in the data ``d`` (within :data:`CLEARANCE_RANGE`)."""
        distance, pair = CLEARANCE_RANGE, None
        for a, b in pairs:
            value = self._mj.mj_geomDistance(self.model, d, a, b, CLEARANCE_RANGE, self._fromto)
            if value < distance:
                distance, pair = value, (a, b)
        return distance, pair

    def _measure_clearance(self) -> None:
        r = self._clearance
        distance, pair = self._closest(self.data, self._leg_pairs)
        if pair is None:
            return
        if distance < r["min"]:
            r["min"], r["time"] = distance, self._time
            r["pair"] = (self._leg_link[pair[0]], self._leg_link[pair[1]])
        if distance < 0.0:
            r["steps"] += 1
            r["first"] = self._time if r["steps"] == 1 else r["first"]
            r["last"] = self._time

    def _after_physics_step(self, time: float) -> None:
        if not self._collide_legs:
            return
        d = self.data
        n = d.ncon
        if not n:
            return
        geoms = d.contact.geom[:n]
        legs = np.flatnonzero(self._leg_mask[geoms[:, 0]] | self._leg_mask[geoms[:, 1]])
        if not len(legs):
            return
        r = self._leg_record
        force = 0.0
        for c in legs:
            self._mj.mj_contactForce(self.model, d, int(c), self._wrench)
            force += float(self._wrench[0])
            r["depth"] = max(r["depth"], -float(d.contact.dist[c]))
            g1, g2 = (int(g) for g in geoms[c])
            left, right = (g1, g2) if g1 in self._left_geoms else (g2, g1)
            r["pairs"].add((self._leg_link[left], self._leg_link[right]))
        r["steps"] += 1
        r["first"] = time if r["steps"] == 1 else r["first"]
        r["last"] = time
        if force > r["force"]:
            r["force"], r["force_time"] = force, time

    @property
    def contact_names(self) -> tuple[str, ...]:
        """Contact sensors: the four sole corners of the left foot, then of the right foot (biped); one per
        foot, named after the robot description's ``contact_sensors`` (point feet)."""
        return self._feet if self._point_feet else CONTACT_NAMES

    def initial_configuration(self) -> np.ndarray:
        """Configuration used by :meth:`reset` without argument."""
        return self._initial.copy()

    def reset(self, q0: np.ndarray | None = None) -> None:
        """Back to time 0 at rest at ``q0`` (joints clipped to their limits), lowest sole on the ground.

        The base keeps ``q0``'s x, y and orientation; its height is shifted so that the lowest sole
        frame lies at z = 0.

        Raises:
            ShapeError, InputError: ``q0`` is not a valid configuration.
        """
        q = self._initial.copy() if q0 is None else self.robot.check_configuration(q0, "q0")
        q[7:] = np.clip(q[7:], self.robot.lower_limits(), self.robot.upper_limits())
        pin.framesForwardKinematics(self.pin_model, self.pin_data, q)
        q[2] -= min(self.pin_data.oMf[i].translation[2] for i in self._foot_ids) - self._foot_radius
        self._rng = np.random.default_rng(self.params.seed)
        qpos = np.zeros(self.model.nq)
        self._write_qpos(qpos, q)
        self._reset_common(qpos, q[7:])
        self._clearance = {"min": CLEARANCE_RANGE, "time": math.nan, "pair": ("", ""), "steps": 0,
                           "first": math.nan, "last": math.nan}
        self._leg_record = {"steps": 0, "first": math.nan, "last": math.nan, "force": 0.0,
                            "force_time": math.nan, "depth": 0.0, "pairs": set()}
        self._standing_height = float(self.data.site_xpos[self._base_site][2])
        self._finish()

    def step(self, dt: float | None = None) -> SimState:
        """Advance by ``dt`` [s] (default: the hardware period; a multiple of the physics timestep).

        Raises:
            InputError: If ``dt`` is not a positive multiple of the timestep.
        """
        self._advance(dt)
        if self._measure_legs:
            self._measure_clearance()
        self._finish()
        return self._state

    # ------------------------------------------------------------------ physics hooks
    def ground_height(self, x: float, y: float) -> float:
        """Height [m] of the ground at ``(x, y)`` (0: the floor; :class:`~walk_mpc.core.sim.terrain.
        TerrainMujocoSim`: its terrain's), what the base height of the fall detection is measured from."""
        return 0.0

    def _write_qpos(self, qpos: np.ndarray, q: np.ndarray) -> None:
        """The pinocchio configuration ``q`` (base position, quaternion xyzw, joints) into MuJoCo's ``qpos``
        (quaternion wxyz, joints at their addresses); the inverse of :meth:`configuration`."""
        qpos[0:3], qpos[3:7] = q[0:3], [q[6], q[3], q[4], q[5]]
        qpos[self._qadr] = q[7:]

    def configuration(self) -> np.ndarray:
        """Current configuration in pinocchio order (base position, quaternion xyzw, joints)."""
        qpos = self.data.qpos
        q = np.empty(self.pin_model.nq)
        q[0:3] = qpos[0:3]
        q[3:7] = qpos[4], qpos[5], qpos[6], qpos[3]
        q[7:] = qpos[self._qadr]
        return q

    def _feet_in_contact(self) -> list[bool]:
        d = self.data
        if not d.ncon:
            return [False] * len(self._sole_geom_ids)
        geoms = d.contact.geom[:d.ncon]
        return [bool(np.any(geoms == g)) for g in self._sole_geom_ids]

    def _before_physics_step(self, time: float) -> None:
        super()._before_physics_step(time)
        opt = self.mujoco_params
        if opt.gravity_feedforward and self._physics_steps % opt.feedforward_substeps == 0:
            self.data.qfrc_applied[self._dadr] = self.feedforward_torques()

    def feedforward_torques(self) -> np.ndarray:
        """Gravity feed-forward ``g(q) - J_c^T f`` of the current state [N m], joints in model order.

        ``f`` stacks the 6D wrenches of the feet in contact (at the sole frames, world-aligned): the
        least-norm solution of the six floating-base rows ``g_base = J_c,base^T f``. No foot in contact:
        ``g(q)`` alone.
        """
        model, data = self.pin_model, self.pin_data
        q = self.configuration()
        g = pin.computeGeneralizedGravity(model, data, q)
        feet = [fid for fid, c in zip(self._foot_ids, self._feet_in_contact()) if c]
        if not feet:
            return g[6:].copy()
        pin.computeJointJacobians(model, data, q)
        frame = pin.LOCAL_WORLD_ALIGNED
        rows = slice(0, 3) if self._point_feet else slice(0, 6)  # point feet: forces, no moments
        jacobian = np.vstack([pin.getFrameJacobian(model, data, fid, frame)[rows] for fid in feet])
        base = jacobian[:, :6].T  # (6, 6 k): g_base = base @ f
        if self._point_feet:  # fewer than three point feet leave the base rows rank deficient
            wrench = np.linalg.lstsq(base, g[:6], rcond=None)[0]
        else:
            wrench = base.T @ np.linalg.solve(base @ base.T, g[:6])  # least norm (full row rank)
        return g[6:] - jacobian[:, 6:].T @ wrench

    # ------------------------------------------------------------------ readings
    def _sole_forces(self) -> tuple[np.ndarray, np.ndarray]:
        """Normal force [N] and centre of pressure (world) of each sole."""
        mj, m, d = self._mj, self.model, self.data
        n = len(self._sole_sites)
        force = np.zeros(n)
        moment = np.zeros((n, 3))
        for c in range(d.ncon):
            g1, g2 = d.contact.geom[c]
            i = self._sole_geoms.get(int(g1), self._sole_geoms.get(int(g2)))
            if i is None:
                continue
            mj.mj_contactForce(m, d, c, self._wrench)
            normal = self._wrench[0]
            force[i] += normal
            moment[i] += normal * d.contact.pos[c]
        cop = np.array([moment[i] / force[i] if force[i] > 0.0 else d.site_xpos[self._sole_sites[i]]
                        for i in range(n)])
        return force, cop

    def _bilinear(self, local: np.ndarray) -> np.ndarray:
        p = self.params
        sx = min(max((local[0] + p.sole_back) / (p.sole_front + p.sole_back), 0.0), 1.0)
        sy = min(max((local[1] + p.sole_right) / (p.sole_left + p.sole_right), 0.0), 1.0)
        return np.array([sx * sy, sx * (1 - sy), (1 - sx) * sy, (1 - sx) * (1 - sy)])

    def corner_positions(self) -> dict[str, np.ndarray]:
        """World position [m] of each contact sensor (sole corners at the current foot poses; the foot
        frames of point feet)."""
        p, d = self.params, self.data
        if self._point_feet:
            return {foot: d.site_xpos[site].copy() for foot, site in zip(self._feet, self._sole_sites)}
        corners = np.array([[p.sole_front, p.sole_left, 0.0], [p.sole_front, -p.sole_right, 0.0],
                            [-p.sole_back, p.sole_left, 0.0], [-p.sole_back, -p.sole_right, 0.0]])
        out = {}
        for foot, site in zip(FEET, self._sole_sites):
            rotation = d.site_xmat[site].reshape(3, 3)
            for corner, local in zip(CORNERS, corners):
                out[f"{foot}_{corner}"] = d.site_xpos[site] + rotation @ local
        return out

    def _finish(self) -> None:
        p, d = self.params, self.data
        force, cops = self._sole_forces()
        corners = np.zeros(8) if not self._point_feet else force.copy()
        for i, site in enumerate(self._sole_sites if not self._point_feet else ()):
            if force[i] > 0.0:
                rotation = d.site_xmat[site].reshape(3, 3)
                local = rotation.T @ (cops[i] - d.site_xpos[site])
                corners[4 * i:4 * i + 4] = force[i] * self._bilinear(local[:2])
        total = float(force.sum())
        cop = np.zeros(3)
        if total > 0.0:
            cop[:2] = (force @ cops)[:2] / total
        q = self.configuration()
        rotation = pin.Quaternion(q[3:7]).toRotationMatrix()
        v = np.concatenate((rotation.T @ d.qvel[0:3], d.qvel[3:6], d.qvel[self._dadr]))
        base_position, base_quat, base_linear, base_angular = self._base_truth()
        base_rotation = d.site_xmat[self._base_site].reshape(3, 3)
        tilt = math.acos(max(-1.0, min(1.0, float(base_rotation[2, 2]))))
        low = (base_position[2] - self.ground_height(base_position[0], base_position[1])
               < self.mujoco_params.fall_height_ratio * self._standing_height)
        self._fallen = self._fallen or tilt > p.fall_tilt or bool(low)
        joint_pos, joint_vel, torque = self._joint_readings()
        imu_quat, gyro, acc = self._imu()
        joint_pos, joint_vel, gyro, acc = add_sensor_noise(p, self._rng, joint_pos, joint_vel, gyro, acc)
        names = self.robot.joint_names
        self._sample = SensorSample(
            time=self._time, joint_names=names, joint_pos=joint_pos, joint_vel=joint_vel,
            motor_names=names, motor_pos=joint_pos, motor_vel=joint_vel, motor_torque=torque,
            contact_names=self.contact_names, contact=corners,
            imu_names=(p.imu_frame,), imu_orientation_xyzw=imu_quat[None, :],
            imu_angular_vel=gyro[None, :], imu_linear_acc=acc[None, :],
            base_estimate_valid=True, base_position=base_position, base_orientation_xyzw=base_quat,
            base_linear_velocity=base_linear, base_angular_velocity=base_angular,
        )
        self._state = SimState(
            time=self._time, step_count=self._steps, q=q, v=v, com=d.subtree_com[self._root_body].copy(),
            zmp=cop, cop=cop, contact_bodies=tuple(self.robot.foot_frames),
            in_contact=tuple(bool(f > 0.0) for f in force), zmp_clip_count=0, fallen=self._fallen,
        )


class MujocoWheelSim(ScriptedWheelsBackend, _MujocoBackend):
    """Wheeled robot (upkie): base on x/z slides, scripted wheel speeds and lifts (see the module doc)."""

    Parameters = _MujocoBackend.Parameters

    def __init__(self, params: WheelPlant.Parameters | None = None,
                 mujoco: _MujocoBackend.Parameters | None = None) -> None:
        """Build the MuJoCo model of the wheeled robot and reset to its reference posture.

        Args:
            params: Wheel plant parameters (URDF, wheels, hardware period, latency, ground / air /
                touchdown scenario).
            mujoco: Physics parameters (defaults if None).

        Raises:
            ModelError: The URDF cannot be loaded, has no wheel, or its tires are not cylinders.
            JointNotFound: A configured wheel is not a joint of the model.
        """
        self.params = params if params is not None else WheelPlant.Parameters()
        self.mujoco_params = mujoco if mujoco is not None else MujocoWheelSim.Parameters()
        p, opt = self.params, self.mujoco_params
        self.robot = RobotModel(RobotModel.Parameters(robot=p.urdf or upkie_urdf()))
        for name in p.wheels:
            self.robot.joint_index_q(name)  # JointNotFound lists the joints
        self.wheels = p.wheels or tuple(n for n in self.robot.joint_names if "wheel" in n)
        if not self.wheels:
            raise ModelError(f"'{self.robot.name}' has no joint named like a wheel; set 'wheels'")
        self.legs = tuple(n for n in self.robot.joint_names if n not in self.wheels)
        tires = self._tire_links()
        spec = mjcf.load_urdf_spec(self.robot.urdf_path, keep_collision_links=tires,
                                   continuous_joints=self.wheels)
        root = mjcf.add_base_joint(spec, "planar", opt.base_damping)
        mjcf.add_floor(spec, opt.friction, solref=(opt.contact_time_constant, opt.contact_damping_ratio))
        self._add_frame_site(spec, self.robot, root, self.robot.base_frame, "imu")
        self._add_frame_site(spec, self.robot, root, self.robot.base_frame, "base")
        self._add_servos(spec, self.legs, opt, self.robot)
        for name in self.wheels:
            joint = spec.joint(name)
            joint.armature = opt.armature
            mjcf.add_velocity_actuator(spec, name, opt.wheel_kd)
        self._init_common(spec, self.robot, p.hardware_period, self.legs, p.latency)
        m = self.model
        self._tire_geoms = []
        for wheel in self.wheels:
            body = m.jnt_bodyid[m.joint(wheel).id]
            geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == body
                     and m.geom_type[g] == self._mj.mjtGeom.mjGEOM_CYLINDER]
            if not geoms:
                raise ModelError(f"wheel '{wheel}' has no tire cylinder in '{self.robot.urdf_path}'")
            self._tire_geoms.append(geoms[0])
        self._wheel_actuators = np.array([m.actuator(n).id for n in self.wheels], dtype=int)
        self._root_body = m.body(root).id
        self._base_z = m.jnt_qposadr[m.joint("base_z").id]
        self._base_z_dof = m.jnt_dofadr[m.joint("base_z").id]
        self._mass = float(m.body_subtreemass[self._root_body])
        cycle = max(1, round((p.ground + p.air + p.touchdown) / p.hardware_period))
        self._cycle_time = cycle * p.hardware_period
        self.reset()

    def _tire_links(self) -> tuple[str, ...]:
        """Links holding the wheels' collision cylinders: the wheel joint's child link and its fixed
        descendants whose name contains 'tire' (or the child link itself)."""
        import xml.etree.ElementTree as ET

        root = ET.parse(str(self.robot.urdf_path)).getroot()
        children: dict[str, list[str]] = {}
        child_of = {}
        for joint in root.findall("joint"):
            parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
            child_of[joint.get("name")] = child
            if joint.get("type") == "fixed":
                children.setdefault(parent, []).append(child)
        tires = []
        for wheel in self.wheels:
            links, stack = [], [child_of[wheel]]
            while stack:
                link = stack.pop()
                links.append(link)
                stack.extend(children.get(link, []))
            named = [link for link in links if "tire" in link]
            tires.extend(named or links[:1])
        return tuple(tires)

    @property
    def in_air(self) -> bool:
        """Whether the lift force acts at the current time (the scenario's ``air`` window)."""
        return self._lifting(self._time)

    def _lifting(self, time: float) -> bool:
        p = self.params
        phase = math.fmod(time + 1e-9, self._cycle_time)
        return p.air > 0.0 and p.ground <= phase < p.ground + p.air

    def wheel_velocity_target(self, time: float) -> float:
        """Scripted wheel velocity [rad/s] at ``time`` [s] (forward rolling for positive values)."""
        opt = self.mujoco_params
        return opt.wheel_velocity_amplitude * math.sin(2.0 * math.pi * time / opt.wheel_velocity_period)

    def reset(self, q0: np.ndarray | None = None) -> None:
        """Back to time 0 at rest, legs at ``q0``'s positions (reference posture if None), tires down."""
        q0 = self.robot.reference_configuration() if q0 is None else self.robot.check_configuration(q0, "q0")
        positions = self.robot.joint_positions(q0)
        m, d = self.model, self.data
        qpos = np.zeros(m.nq)
        qpos[self._qadr] = [positions[n] for n in self.robot.joint_names]
        legs = np.array([positions[n] for n in self.legs])
        self._reset_common(qpos, legs)
        qpos[self._base_z] = -self._lowest_tire_point()
        self._reset_common(qpos, legs)
        # Wheel directions: the sign of each wheel axis along world y makes positive targets roll forward.
        self._wheel_sign = np.array([np.sign(d.xaxis[m.joint(w).id][1]) or 1.0 for w in self.wheels])
        self._standing_height = float(d.qpos[self._base_z])
        self._publish()

    def _lowest_tire_point(self) -> float:
        d, m = self.data, self.model
        lowest = math.inf
        for g in self._tire_geoms:
            axis_z = abs(d.geom_xmat[g].reshape(3, 3)[2, 2])
            radius, half_length = m.geom_size[g][0], m.geom_size[g][1]
            low = d.geom_xpos[g][2] - radius * math.sqrt(max(0.0, 1.0 - axis_z ** 2)) - half_length * axis_z
            lowest = min(lowest, low)
        return lowest

    def step(self, dt: float | None = None) -> SimState:
        """Advance by ``dt`` [s] (default: the hardware period; a multiple of the physics timestep).

        Raises:
            InputError: If ``dt`` is not a positive multiple of the timestep.
        """
        self._advance(dt)
        self._publish()
        return self._state

    def _before_physics_step(self, time: float) -> None:
        super()._before_physics_step(time)
        d = self.data
        h = self.mujoco_params.timestep
        d.ctrl[self._wheel_actuators] = self._wheel_sign * self.wheel_velocity_target(time + h)
        force = 0.0
        if self._lifting(time):
            omega = 2.0 * math.pi * self.mujoco_params.lift_frequency
            error = self._standing_height + self.mujoco_params.lift_height - d.qpos[self._base_z]
            force = self._mass * (GRAVITY + omega * omega * error - 2.0 * omega * d.qvel[self._base_z_dof])
        if force > 0.0:
            d.xfrc_applied[self._root_body, 2] = force

    def _publish(self) -> None:
        d = self.data
        joint_pos, joint_vel, torque = self._joint_readings()
        imu_quat, gyro, acc = self._imu()
        names = self.robot.joint_names
        base_position, base_quat, base_linear, base_angular = self._base_truth()
        self._sample = SensorSample(
            time=self._time, joint_names=names, joint_pos=joint_pos, joint_vel=joint_vel,
            motor_names=names, motor_pos=joint_pos, motor_vel=joint_vel, motor_torque=torque,
            imu_names=(self.robot.base_frame,), imu_orientation_xyzw=imu_quat[None, :],
            imu_angular_vel=gyro[None, :], imu_linear_acc=acc[None, :],
            base_estimate_valid=True, base_position=base_position, base_orientation_xyzw=base_quat,
            base_linear_velocity=base_linear, base_angular_velocity=base_angular,
        )
        positions = {n: math.remainder(float(x), 2.0 * math.pi) if n in self.wheels else float(x)
                     for n, x in zip(names, joint_pos)}
        q = self.robot.configuration_from_joints(positions, base_position, base_quat)
        v = np.zeros(self.robot.nv)
        v[0:3] = base_linear
        for name, velocity in zip(names, joint_vel):
            v[self.robot.joint_index_v(name)] = velocity
        touching = set()
        for g1, g2 in d.contact.geom[:d.ncon]:
            touching.update((int(g1), int(g2)))
        self._state = SimState(
            time=self._time, step_count=self._steps, q=q, v=v, com=d.subtree_com[self._root_body].copy(),
            zmp=np.zeros(3), cop=np.zeros(3), contact_bodies=self.wheels,
            in_contact=tuple(g in touching for g in self._tire_geoms),
        )


def create_backend(params: KinematicSim.Parameters, mujoco: MujocoSim.Parameters | None = None) -> MujocoSim:
    """The MuJoCo biped backend with the kinematic plant's parameters (see ``sim.create_backend``)."""
    return MujocoSim(params, mujoco)


def create_wheel_backend(params: WheelPlant.Parameters,
                         mujoco: MujocoWheelSim.Parameters | None = None) -> MujocoWheelSim:
    """The MuJoCo wheeled backend with the wheel plant's parameters."""
    return MujocoWheelSim(params, mujoco)


__all__ = ["CLEARANCE_RANGE", "INTEGRATORS", "LEFT_LEG_BITS", "NO_COLLISION_BITS", "RIGHT_LEG_BITS",
           "LegClearance", "LegContacts", "MujocoSim", "MujocoWheelSim", "create_backend",
           "create_wheel_backend"]
