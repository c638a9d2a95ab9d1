"""Whole-body differential inverse kinematics (damped Gauss-Newton) on pinocchio.

Tasks, all expressed in the world frame (pinocchio ``LOCAL_WORLD_ALIGNED``):
centre of mass position (3), foot / end-effector frames (position 3, optional
orientation 3), torso orientation (3), and a posture preference acting in the null
space of the tasks. Joint position limits are enforced on every iteration by an
active set: a joint whose step would leave its limits is fixed at the limit and the
step is solved again with the remaining joints.

One iteration at configuration ``q`` with stacked task Jacobian ``J`` (m x nv),
task error ``e = target - current`` (m), preferred (posture) step ``dq_p`` and row
damping ``rho_i = (damping + error_damping |e|^2) / weight_i`` solves

    min_dq  |dq - dq_p|^2 + sum_i |J_i dq - e_i|^2 / rho_i
    =>  dq = dq_p + J^T (J J^T + diag(rho))^-1 (e - J dq_p)

an m x m Cholesky solve (m = 18 for Talos, nv = 38). The damping vanishes as the
error does, so reachable targets are met exactly; weights set the compromise
between conflicting targets.

Error policy: inputs are validated up front (:class:`InputError` naming the value);
a solve that does not reach the tolerances returns ``success=False`` with the best
configuration found (finite, within joint limits) and its residuals, never garbage.
Pinocchio errors are wrapped into :class:`ModelError`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dposv, dpotrs

from walk_mpc.core._validate import finite_vector
from walk_mpc.core.body.robot import RobotModel, rotation_z
from walk_mpc.core.errors import FrameNotFound, InputError, ModelError, ParameterError, ShapeError
from walk_mpc.core.params import check_int_range, check_nonnegative, check_positive, check_range
from walk_mpc.core.walk.step import Foot

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_COM_POSITION = pin.KinematicLevel.POSITION
# Bound once: the hot loop calls these a few dozen times per solve.
_forward_kinematics = pin.forwardKinematics
_update_frame_placement = pin.updateFramePlacement
_center_of_mass = pin.centerOfMass
_jacobian_center_of_mass = pin.jacobianCenterOfMass
_compute_joint_jacobians = pin.computeJointJacobians
_get_frame_jacobian = pin.getFrameJacobian
_log3 = pin.log3
_integrate = pin.integrate
_difference = pin.difference
_POSITION = 0
_ORIENTATION = 1
#: Use the compiled steps of :mod:`.ik_kernel` when numba is installed (tests switch it off to exercise
#: the numpy implementation).
USE_KERNEL = True
_CHORD_CONTRACTION = 1e-2  # chord step when (residual / residual before the last step)^2 is below this
#: The posture the IK pulls towards keeps limited joints this fraction of their range inside their limits.
#: A posture at a limit (Talos' grippers rest at their upper one) leaves the joint there, and any task step
#: pushing it outwards (a CoM moving back, sideways or up) then takes the constrained re-solve of the active
#: set, which also forgoes the next chord step.
_POSTURE_LIMIT_MARGIN = 0.01


_IDENTITY = np.eye(3)
_ORTHONORMAL_TOLERANCE = 1e-6 + 1e-5 * _IDENTITY  # np.allclose(R R^T, I, atol=1e-6) elementwise


def _rotation(name: str, value) -> np.ndarray:
    try:
        array = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, value, "a 3x3 rotation matrix") from None
    if array.shape != (3, 3):
        raise ShapeError(name, array.shape, (3, 3))
    # One product and one comparison; NaN/inf fail it too and are told apart below.
    if not (np.abs(array @ array.T - _IDENTITY) <= _ORTHONORMAL_TOLERANCE).all() or _det3(array) < 0.0:
        if not np.all(np.isfinite(array)):
            raise InputError(name, array, "finite values (no NaN/inf)")
        raise InputError(name, array, "a rotation matrix (orthonormal, determinant +1)")
    array.setflags(write=False)
    return array


def _det3(matrix: np.ndarray) -> float:
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = matrix.tolist()
    return a0 * (b1 * c2 - b2 * c1) - a1 * (b0 * c2 - b2 * c0) + a2 * (b0 * c1 - b1 * c0)


def _posture_vector(value) -> np.ndarray:
    posture = np.array(value, dtype=float)
    if posture.ndim != 1 or not np.all(np.isfinite(posture)):
        raise InputError("targets.posture", value, "a finite configuration vector")
    posture.setflags(write=False)
    return posture


@dataclasses.dataclass(frozen=True)
class IKTargets:
    """Targets of one IK solve, in the world frame.

    Frame keys are frame names of the model or :class:`Foot` values (LEFT/RIGHT,
    resolved to the robot's sole frames). A task whose target is absent is not
    constrained.

    Attributes:
        com_position: Centre of mass position [m], shape (3,), or None.
        foot_positions: Frame origin positions [m] by frame, shape (3,) each.
        foot_rotations: Frame orientations (3x3 rotation matrices) by frame; each key
            must also have a position. Feet without a rotation are point tasks (quadrupeds).
        torso_orientation: Orientation of the robot's torso frame (3x3), or None.
        posture: Preferred configuration (nq,), or None for the robot's reference posture. The solver
            pulls towards it with its limited joints kept 1 % of their range inside their limits.
    """

    com_position: np.ndarray | None = None
    foot_positions: Mapping[str | Foot, np.ndarray] = dataclasses.field(default_factory=dict)
    foot_rotations: Mapping[str | Foot, np.ndarray] = dataclasses.field(default_factory=dict)
    torso_orientation: np.ndarray | None = None
    posture: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.com_position is not None:
            com = finite_vector("targets.com_position", self.com_position, 3, read_only=True)
            object.__setattr__(self, "com_position", com)
        positions = {}
        for key, value in dict(self.foot_positions).items():
            positions[key] = finite_vector(f"targets.foot_positions[{key!r}]", value, 3, read_only=True)
        rotations = {}
        for key, value in dict(self.foot_rotations).items():
            if key not in positions:
                raise InputError(f"targets.foot_rotations[{key!r}]", key, "a frame that also has a position")
            rotations[key] = _rotation(f"targets.foot_rotations[{key!r}]", value)
        object.__setattr__(self, "foot_positions", MappingProxyType(positions))
        object.__setattr__(self, "foot_rotations", MappingProxyType(rotations))
        if self.torso_orientation is not None:
            object.__setattr__(
                self, "torso_orientation", _rotation("targets.torso_orientation", self.torso_orientation)
            )
        if self.posture is not None:
            object.__setattr__(self, "posture", _posture_vector(self.posture))

    def same_as(self, other: IKTargets) -> bool:
        """Whether ``other`` has exactly the same targets (bit for bit): the same solve from the same
        initial configuration gives the same result."""
        if self is other:
            return True
        if not isinstance(other, IKTargets):
            return False
        for a, b in ((self.com_position, other.com_position), (self.posture, other.posture),
                     (self.torso_orientation, other.torso_orientation)):
            if (a is None) != (b is None) or (a is not None and a is not b and not np.array_equal(a, b)):
                return False
        for mine, theirs in ((self.foot_positions, other.foot_positions),
                             (self.foot_rotations, other.foot_rotations)):
            if mine.keys() != theirs.keys():
                return False
            for key, value in mine.items():
                if value is not theirs[key] and not np.array_equal(value, theirs[key]):
                    return False
        return True

    @classmethod
    def _trusted(
        cls,
        com_position: np.ndarray | None,
        foot_positions: dict,
        foot_rotations: dict,
        torso_orientation: np.ndarray | None,
        posture: np.ndarray | None = None,
    ) -> IKTargets:
        """Targets from arrays the caller guarantees valid, without validation (internal hot path).

        Every array must be a float64 array of the right shape with finite values, every rotation
        orthonormal with determinant +1 (e.g. products of validated rotations and ``rotation_z``), and
        every rotation key a position key. The arrays are made read-only, not copied; the dicts are
        owned by the targets afterwards.
        """
        for array in (com_position, torso_orientation, posture, *foot_positions.values(),
                      *foot_rotations.values()):
            if array is not None:
                array.flags.writeable = False
        targets = object.__new__(cls)
        targets.__dict__.update(com_position=com_position, foot_positions=MappingProxyType(foot_positions),
                                foot_rotations=MappingProxyType(foot_rotations),
                                torso_orientation=torso_orientation, posture=posture)
        return targets


@dataclasses.dataclass(frozen=True)
class IKProblem:
    """The linear least-squares step of one Gauss-Newton iteration (for inspection and tests).

    Attributes:
        q: Configuration the problem is linearised at (nq,).
        jacobian: Stacked task Jacobian (m, nv), world-aligned rows.
        error: Task error ``target - current`` (m,); orientation rows hold ``log3(R_target R^T)``.
        row_damping: Damping of each row, ``rho_i`` (m,).
        preferred_step: Posture step ``dq_p`` (nv,), zero on the floating base.
        dq_lower: Lower bound of the step from joint limits (nv,), -inf where unbounded.
        dq_upper: Upper bound of the step (nv,), +inf where unbounded.
        block_names: Name of each 3-row block, e.g. 'com', 'left_sole_link.orientation'.
    """

    q: np.ndarray
    jacobian: np.ndarray
    error: np.ndarray
    row_damping: np.ndarray
    preferred_step: np.ndarray
    dq_lower: np.ndarray
    dq_upper: np.ndarray
    block_names: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class IKResult:
    """Outcome of one IK solve.

    Attributes:
        q: Best configuration found (nq,), finite and within joint limits (read-only).
        success: True when every task residual is within tolerance.
        residuals: Residual norm of each task block by name [m or rad].
        position_residual: Largest position residual [m] (CoM, frames).
        orientation_residual: Largest orientation residual [rad] (0 without orientation tasks).
        iterations: Gauss-Newton steps taken.
        solve_time: Wall time of the solve [s].
        limited_joints: Actuated joints held at a position limit in the last step.
        message: Why the solve stopped.
    """

    q: np.ndarray
    success: bool
    residuals: Mapping[str, float]
    position_residual: float
    orientation_residual: float
    iterations: int
    solve_time: float
    limited_joints: tuple[str, ...] = ()
    message: str = ""


def _as_index(indices: list[int]) -> slice | np.ndarray:
    """A slice when ``indices`` are contiguous and increasing, else an index array."""
    if indices and indices == list(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return np.asarray(indices, dtype=int)


class _Layout:
    """Row layout of the stacked tasks for one set of active targets (cached between solves).

    Position blocks (CoM, frame positions) come first, orientation blocks after, so
    that position errors are one vector subtraction.
    """

    def __init__(self, solver: IKSolver, targets: IKTargets) -> None:
        robot = solver.robot
        params = solver.params
        self.key = solver._layout_key(targets)
        self.com = targets.com_position is not None
        frame_ids: list[int] = []

        def slot(frame_id: int) -> int:
            if frame_id not in frame_ids:
                frame_ids.append(frame_id)
            return frame_ids.index(frame_id)

        names, weights, tolerances, kinds = [], [], [], []
        # Position blocks.
        self.position_keys: list[str | Foot] = []
        self.position_slots: list[tuple[int, int]] = []  # (placement slot, row)
        row = 0
        if self.com:
            names.append("com")
            weights.append(params.com_weight)
            row += 3
        frames = {key: robot.frame_id(solver._frame_name(key)) for key in targets.foot_positions}
        for key, frame_id in frames.items():
            names.append(f"{solver._frame_name(key)}.position")
            weights.append(params.foot_weight)
            self.position_keys.append(key)
            self.position_slots.append((slot(frame_id), row))
            row += 3
        self.position_rows = row
        tolerances += [params.tolerance] * len(names)
        kinds += [_POSITION] * len(names)
        # Orientation blocks (key None: the torso).
        self.rotation_keys: list[str | Foot | None] = []
        self.rotation_slots: list[tuple[int, int]] = []
        rotation_items = [(key, frames[key], params.foot_weight, solver._frame_name(key))
                          for key in targets.foot_rotations]
        if targets.torso_orientation is not None:
            rotation_items.append((None, solver._torso_id, params.torso_weight, robot.torso_frame))
        for key, frame_id, weight, frame in rotation_items:
            names.append(f"{frame}.orientation")
            weights.append(weight)
            tolerances.append(params.orientation_tolerance)
            kinds.append(_ORIENTATION)
            self.rotation_keys.append(key)
            self.rotation_slots.append((slot(frame_id), row))
            row += 3
        self.rows = row
        self.frame_ids = frame_ids
        # Jacobian rows of each frame: (frame_id, position row or -1, orientation row or -1).
        self.jacobian_frames = []
        for index, frame_id in enumerate(frame_ids):
            position_row = next((r for s_, r in self.position_slots if s_ == index), -1)
            rotation_row = next((r for s_, r in self.rotation_slots if s_ == index), -1)
            self.jacobian_frames.append((frame_id, position_row, rotation_row))
        self.names = tuple(names)
        self.row_inverse_weight = np.repeat(1.0 / np.asarray(weights, dtype=float), 3)
        self.inverse_tolerance_sq = 1.0 / np.asarray(tolerances, dtype=float) ** 2
        self.kinds = np.asarray(kinds, dtype=int)
        self.jacobian = np.zeros((row, robot.nv))
        self.error = np.zeros(row)
        self.current = np.zeros(self.position_rows)
        self.step = np.zeros(robot.nv)  # step, Cholesky factor and free-joint buffers of the kernel
        self.factor = np.zeros((row, row))
        self.free = np.ones(robot.nv)
        self.position_error = self.error[: self.position_rows]
        # Sums the squared errors of each 3-row block, divided by the block's squared tolerance.
        self.block_scale = np.kron(np.diag(self.inverse_tolerance_sq), np.ones((1, 3)))
        if not row:
            self.block_scale = np.zeros((0, 0))


class IKSolver:
    """Whole-body IK of a floating-base robot (biped 6D feet or quadruped 3D feet).

    Example:
        >>> robot = RobotModel()
        >>> solver = IKSolver(robot)
        >>> q0 = robot.reference_configuration()
        >>> feet = robot.foot_poses(q0)
        >>> targets = IKTargets(
        ...     com_position=robot.com(q0) + [0.01, 0.0, 0.0],
        ...     foot_positions={f: p for f, (p, _) in feet.items()},
        ...     foot_rotations={f: r for f, (_, r) in feet.items()},
        ...     torso_orientation=np.eye(3))
        >>> result = solver.solve(targets, q0)
        >>> result.success, result.position_residual < 1e-4
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """IK parameters.

        Attributes:
            max_iterations: Largest number of Gauss-Newton steps per solve.
            tolerance: Position residual [m] (CoM and frames) below which a task is met.
            orientation_tolerance: Orientation residual [rad] below which a task is met.
            damping: Constant damping of every task row [m^2] (Levenberg-Marquardt).
            error_damping: Extra row damping per squared error norm [-] (robustness far from targets).
            com_weight: Weight of the CoM task [-].
            foot_weight: Weight of the foot (frame) tasks [-].
            torso_weight: Weight of the torso orientation task [-].
            posture_gain: Fraction of the posture error corrected per step, in the task null space [-].
            pelvis_gain: Fraction of the pelvis (base) tilt corrected per step towards upright (its yaw kept),
                in the task null space [-], while a leg reaches down (bipeds): the CoM target more than
                ``pelvis_reach_start`` [m] above its height over the soles in the reference posture, over the
                lower sole target (full from ``pelvis_reach_full``). Known stairs: the leg on the lower
                tread, stretched to its sole (the rear one at a step up's lift-off, the front one at a step
                down's landing), had the IK pitch the pelvis by up to 9.5 degrees to reach it, 0.5 from the
                10 degree fall limit (MuJoCo Talos, state estimated, 20 steps over two flights of 10 cm
                stairs: largest base tilt, 9 placements of the edges, stabilizer off / on 8.7 / 9.8 ->
                8.3 / 8.1 degrees, all walk). On level ground the CoM stays within the soles' height
                offsets (the stabilizer's, at most 2.5 cm) of its reference height: no change, bit for bit.
            pelvis_reach_start: See ``pelvis_gain`` [m] (above the stabilizer's 2.5 cm sole height offsets).
            pelvis_reach_full: See ``pelvis_gain`` [m].
            pelvis_level_gain: Fraction of the pelvis (base) tilt corrected per step towards upright (its yaw
                kept), in the task null space [-], on every solve (not gated on reach; where ``pelvis_gain``
                acts the larger of the two). 0: off (the default; the commands bit for bit those without it).
            max_step: Largest change of any velocity coordinate per step [rad or m].
            reuse_jacobian: After a full step that cut the residual tenfold, take the next step
                with the same Jacobian and Cholesky factor (chord step, no posture term), and
                further chord steps while each cuts the residual tenfold.
            acceptance_factor: A solve that reaches ``max_iterations`` with every residual within this
                multiple of its tolerance (default 100: 1 mm, 0.01 rad) still succeeds (its message says
                so): the next tick solves again from it and the targets are absolute, so nothing
                accumulates, while holding the last command instead would freeze the robot mid-motion.
                1 = only converged solves succeed.
            compiled_steps: Take the compiled (numba) Gauss-Newton steps of :mod:`.ik_kernel` when numba is
                installed; False: the numpy/LAPACK steps (the same algorithm). The compiled steps save about
                15 us per Talos solve (61 against 75 us, ``benchmarks/ik_talos.py``) and cost about 0.25 s
                when the solver is built (numba's import and the two kernels loaded from its cache): the
                graph's ik node (config/walk_mpc.yaml) turns them off, its restart matters more (issue 17).
        """

        max_iterations: int = 10
        tolerance: float = 1e-5
        orientation_tolerance: float = 1e-4
        damping: float = 1e-8
        error_damping: float = 1e-2
        com_weight: float = 1.0
        foot_weight: float = 1.0
        torso_weight: float = 0.5
        posture_gain: float = 0.1
        pelvis_gain: float = 1.0
        pelvis_reach_start: float = 0.035
        pelvis_reach_full: float = 0.05
        pelvis_level_gain: float = 0.0
        max_step: float = 0.3
        reuse_jacobian: bool = True
        acceptance_factor: float = 100.0
        compiled_steps: bool = True

        def __post_init__(self) -> None:
            check_int_range("max_iterations", self.max_iterations, 1, 1000)
            check_positive("tolerance", self.tolerance)
            check_positive("orientation_tolerance", self.orientation_tolerance)
            check_positive("damping", self.damping)
            check_nonnegative("error_damping", self.error_damping)
            check_positive("com_weight", self.com_weight)
            check_positive("foot_weight", self.foot_weight)
            check_positive("torso_weight", self.torso_weight)
            check_range("posture_gain", self.posture_gain, 0.0, 1.0)
            check_range("pelvis_gain", self.pelvis_gain, 0.0, 1.0)
            check_range("pelvis_level_gain", self.pelvis_level_gain, 0.0, 1.0)
            check_nonnegative("pelvis_reach_start", self.pelvis_reach_start)
            if not self.pelvis_reach_full > self.pelvis_reach_start:
                raise ParameterError("pelvis_reach_full", self.pelvis_reach_full,
                                     f"more than pelvis_reach_start ({self.pelvis_reach_start} m)")
            check_positive("max_step", self.max_step)
            if not isinstance(self.reuse_jacobian, bool):
                raise ParameterError("reuse_jacobian", self.reuse_jacobian, "true or false")
            if not isinstance(self.compiled_steps, bool):
                raise ParameterError("compiled_steps", self.compiled_steps, "true or false")
            factor = self.acceptance_factor
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor < 1e6:
                raise ParameterError("acceptance_factor", self.acceptance_factor, "a number in [1, 1e6)")

    def __init__(self, robot: RobotModel, params: IKSolver.Parameters | None = None) -> None:
        """Create a solver for ``robot`` (it owns its own pinocchio data)."""
        self.robot = robot
        self.params = params if params is not None else IKSolver.Parameters()
        self.model = robot.model
        self.data = robot.model.createData()
        self._torso_id = robot.frame_id(robot.torso_frame)
        self._pelvis_weight = 0.0
        self._sole_keys = None  # (Foot key, frame name) of the left and right soles of a biped
        if robot.is_biped:
            self._sole_keys = ((Foot.LEFT, robot.left_foot_frame), (Foot.RIGHT, robot.right_foot_frame))
            reference = robot.reference_configuration()
            soles = [robot.frame_pose(reference, frame)[0][2] for _, frame in self._sole_keys]
            self._com_height = float(robot.com(reference)[2]) - 0.5 * (soles[0] + soles[1])
        nv = robot.nv
        lower, upper = self.model.lowerPositionLimit, self.model.upperPositionLimit
        idx_q, idx_v = [], []
        for name in robot.joint_names:
            joint = self.model.joints[self.model.getJointId(name)]
            if joint.nq == 1 and joint.nv == 1 and np.isfinite(lower[joint.idx_q]) and np.isfinite(
                upper[joint.idx_q]
            ):
                idx_q.append(joint.idx_q)
                idx_v.append(joint.idx_v)
        self._lower = np.asarray(lower[idx_q], dtype=float)
        self._upper = np.asarray(upper[idx_q], dtype=float)
        # Basic slices when the limited joints are contiguous (every robot here): cheaper indexing.
        self._limit_q = _as_index(idx_q)
        self._limit_v = _as_index(idx_v)
        self._joint_of_v = {robot.joint_index_v(name): name for name in robot.joint_names}
        self._dq_lower = np.full(nv, -np.inf)
        self._dq_upper = np.full(nv, np.inf)
        self._margin = _POSTURE_LIMIT_MARGIN * (self._upper - self._lower)
        self._reference = self._inside_limits(robot.reference_configuration())
        self._layout: _Layout | None = None
        self.last_result: IKResult | None = None
        self._kernel = _load_kernel() if USE_KERNEL and self.params.compiled_steps else None

    # ------------------------------------------------------------------ public API
    def reset(self) -> None:
        """Forget the cached task layout and the last result."""
        self._layout = None
        self.last_result = None

    def build_ik(self, targets: IKTargets, q) -> IKProblem:
        """Linearise the IK at ``q``: the least-squares problem of one Gauss-Newton step.

        Raises:
            InputError: If ``q`` is malformed or non-finite.
            FrameNotFound: If a target frame is not in the model.
        """
        q = self.robot.check_configuration(q, "q_init")
        layout = self._prepare(targets)
        posture = self._posture(targets)
        self._pelvis_weight = self._reach_weight(targets)
        self._evaluate(layout, *self._load_targets(layout, targets), q)
        self._jacobians(layout)
        rho = self._row_damping(layout)
        dq_p = self._preferred_step(q, posture)
        self._step_bounds(q)
        return IKProblem(
            q=q,
            jacobian=layout.jacobian.copy(),
            error=layout.error.copy(),
            row_damping=rho,
            preferred_step=dq_p,
            dq_lower=self._dq_lower.copy(),
            dq_upper=self._dq_upper.copy(),
            block_names=layout.names,
        )

    def solve_ik(self, problem: IKProblem) -> np.ndarray:
        """One Gauss-Newton step ``dq`` (nv,) of ``problem``, within its step bounds."""
        dq, _, _ = self._solve_step(
            problem.jacobian, problem.error, problem.row_damping, problem.preferred_step,
            problem.dq_lower, problem.dq_upper,
        )
        return dq

    def solve(self, targets: IKTargets, q_init) -> IKResult:
        """Iterate Gauss-Newton steps from ``q_init`` until every task is within tolerance.

        Args:
            targets: Task targets in the world frame.
            q_init: Initial configuration (nq,), e.g. the previous solution or the
                measured configuration; joints outside their limits are clipped first.

        Returns:
            The result; ``success`` is False when ``max_iterations`` is reached first with a residual
            beyond ``acceptance_factor`` times a tolerance.

        Raises:
            InputError: If ``q_init`` is malformed or non-finite.
            FrameNotFound: If a target frame is not in the model.
        """
        start = time.perf_counter()
        q = self._initial_configuration(q_init)
        layout = self._prepare(targets)
        posture = self._posture(targets)
        self._pelvis_weight = self._reach_weight(targets)
        positions, rotations = self._load_targets(layout, targets)
        try:
            best_q, best_merit, best_sq, iterations, limited, message = self._iterate(
                layout, positions, rotations, posture, q)
        except Exception as exc:  # pinocchio/LAPACK failures; our inputs were validated above
            raise ModelError(f"IK iteration failed in pinocchio: {exc}") from exc
        if best_sq is None:  # kinematics were not finite even at q_init
            best_sq = np.full(len(layout.names), math.inf)
        success = best_merit <= 1.0
        if not success and best_merit <= self.params.acceptance_factor ** 2:
            success = True
            message = f"{message}; within {self.params.acceptance_factor:g} x the tolerances (accepted)"
        result = self._result(layout, best_q, success, best_sq, iterations,
                              time.perf_counter() - start, limited, message)
        self.last_result = result
        return result

    def _iterate(self, layout: _Layout, positions, rotations, posture, q):
        """Gauss-Newton loop; returns (best q, its merit, its block errors, iterations, limited, message)."""
        params = self.params
        max_iterations = params.max_iterations
        kernel = self._kernel if layout.rows else None
        kernel_ok, kernel_limited = (kernel.STEP_OK, kernel.STEP_LIMITED) if kernel is not None else (0, 0)
        best_q, best_merit, best_sq = q, math.inf, None
        iterations = 0
        limited: tuple[str, ...] = ()
        message = "max_iterations reached"
        # Cholesky factor of the last full step (upper from LAPACK, or lower from the kernel) and the
        # merit before the last step.
        factor, factor_merit, compiled_factor = None, math.inf, False
        while True:
            block_sq, merit = self._evaluate(layout, positions, rotations, q)
            if not math.isfinite(merit):
                message = "non-finite kinematics"
                break
            if merit < best_merit:
                best_q, best_merit, best_sq = q, merit, block_sq
            if merit <= 1.0:
                message = "converged"
                break
            if iterations >= max_iterations:
                break
            dq = None
            self._step_bounds(q)
            if factor is not None and merit < _CHORD_CONTRACTION * factor_merit:
                # Chord step: the last step contracted well, so reuse the last full step's Jacobian
                # and factor (the error rows are this iteration's).
                if compiled_factor:
                    dq = layout.step
                    if not kernel.chord_step(factor, layout.jacobian, layout.error, self._dq_lower,
                                             self._dq_upper, params.max_step, dq):
                        dq = None
                else:
                    dq = self._chord_step(layout, factor)
                limited = ()
                factor_merit = merit
            if dq is None:
                factor = None
                self._jacobians(layout)
                dq_p = self._preferred_step(q, posture)
                status = -1 if kernel is None else kernel.full_step(
                    layout.jacobian, layout.error, params.damping, params.error_damping,
                    layout.row_inverse_weight, dq_p, self._dq_lower, self._dq_upper, params.max_step,
                    layout.step, layout.factor, layout.free)
                compiled_factor = status == kernel_ok
                if compiled_factor:  # the common case: no joint limit binds
                    dq, limited, factor = layout.step, (), layout.factor
                elif status == kernel_limited:
                    dq, limited, factor = layout.step, self._limited(layout.free), None
                else:
                    dq, limited, factor = self._solve_step(
                        layout.jacobian, layout.error, self._row_damping(layout), dq_p, self._dq_lower,
                        self._dq_upper,
                    )
                    if not math.isfinite(float(dq @ dq)):
                        message = "non-finite step"
                        break
                factor_merit = merit
                if not params.reuse_jacobian:
                    factor = None
            elif not compiled_factor and not math.isfinite(float(dq @ dq)):  # numpy chord step
                message = "non-finite step"
                break
            q = _integrate(self.model, q, dq)
            iterations += 1
        return best_q, best_merit, best_sq, iterations, limited, message

    def solve_two(self, targets_T: IKTargets, targets_2T: IKTargets, q_measured) -> tuple[IKResult, IKResult]:
        """The two solutions of one control loop (seed 001).

        The first reaches the targets of the next control period T from the
        measured configuration; the second, for 2T, starts from the first's
        solution (its best configuration, even when it did not converge), so the
        joint controllers have a command for the period after next.

        Returns:
            (result for T, result for 2T).
        """
        first = self.solve(targets_T, q_measured)
        second = self.solve(targets_2T, first.q)
        return first, second

    # ------------------------------------------------------------------ internals
    def _frame_name(self, key: str | Foot) -> str:
        robot = self.robot
        if isinstance(key, Foot):
            if not robot.is_biped:
                raise FrameNotFound(f"Foot.{key.name}", robot.foot_frames)
            return robot.left_foot_frame if key is Foot.LEFT else robot.right_foot_frame
        if not isinstance(key, str):
            raise FrameNotFound(repr(key), robot.frame_names)
        return key

    def _layout_key(self, targets: IKTargets) -> tuple:
        return (
            targets.com_position is not None,
            tuple((key, key in targets.foot_rotations) for key in targets.foot_positions),
            targets.torso_orientation is not None,
        )

    def _prepare(self, targets: IKTargets) -> _Layout:
        if not isinstance(targets, IKTargets):
            raise InputError("targets", type(targets).__name__, "an IKTargets instance")
        layout = self._layout
        if layout is None or layout.key != self._layout_key(targets):
            layout = _Layout(self, targets)
            self._layout = layout
        return layout

    def _posture(self, targets: IKTargets) -> np.ndarray:
        if targets.posture is None:
            return self._reference
        if targets.posture.shape != (self.robot.nq,):
            raise ShapeError("targets.posture", targets.posture.shape, (self.robot.nq,))
        return self._inside_limits(targets.posture)

    def _inside_limits(self, posture: np.ndarray) -> np.ndarray:
        """``posture`` with its limited joints at least ``_POSTURE_LIMIT_MARGIN`` of their range inside."""
        inside = posture.copy()
        limited = inside[self._limit_q]
        np.minimum(limited, self._upper - self._margin, out=limited)
        np.maximum(limited, self._lower + self._margin, out=limited)
        if type(self._limit_q) is not slice:
            inside[self._limit_q] = limited
        return inside

    def _load_targets(self, layout: _Layout, targets: IKTargets) -> tuple[np.ndarray, list[np.ndarray]]:
        """Target positions stacked as the position rows, and target rotations in block order."""
        parts = [targets.com_position] if layout.com else []
        parts += [targets.foot_positions[key] for key in layout.position_keys]
        positions = np.concatenate(parts) if parts else np.zeros(0)
        rotations = [
            targets.torso_orientation if key is None else targets.foot_rotations[key]
            for key in layout.rotation_keys
        ]
        return positions, rotations

    def _evaluate(self, layout: _Layout, positions: np.ndarray, rotations: list[np.ndarray],
                  q: np.ndarray) -> tuple[np.ndarray, float]:
        """Forward kinematics at ``q``; fills ``layout.error``.

        Returns:
            (norm / tolerance)^2 of each 3-row block, and the merit, their maximum.
        """
        model, data = self.model, self.data
        _forward_kinematics(model, data, q)
        placements = [_update_frame_placement(model, data, frame_id) for frame_id in layout.frame_ids]
        current = layout.current
        if layout.com:
            current[0:3] = _center_of_mass(model, data, _COM_POSITION, False)
        for index, row in layout.position_slots:
            current[row:row + 3] = placements[index].translation
        np.subtract(positions, current, out=layout.position_error)
        error = layout.error
        for (index, row), rotation in zip(layout.rotation_slots, rotations):
            error[row:row + 3] = _log3(rotation.dot(placements[index].rotation.T))
        if not layout.rows:
            return np.zeros(0), 0.0
        scaled = layout.block_scale.dot(error * error)  # (block norm / tolerance)^2
        return scaled, float(scaled.max())  # NaN propagates (non-finite kinematics)

    def _jacobians(self, layout: _Layout) -> None:
        """Task Jacobians at the configuration of the last :meth:`_evaluate`."""
        model, data = self.model, self.data
        jacobian = layout.jacobian
        if layout.com:
            # Also fills the joint Jacobians data.J (oMi.act(S) per joint), as computeJointJacobians
            # does; test_ik checks every task Jacobian against finite differences.
            jacobian[0:3] = _jacobian_center_of_mass(model, data, False)
        else:
            _compute_joint_jacobians(model, data)
        for frame_id, position_row, rotation_row in layout.jacobian_frames:
            frame_jacobian = _get_frame_jacobian(model, data, frame_id, _LWA)
            if position_row >= 0:
                jacobian[position_row:position_row + 3] = frame_jacobian[:3]
            if rotation_row >= 0:
                jacobian[rotation_row:rotation_row + 3] = frame_jacobian[3:]

    def _row_damping(self, layout: _Layout) -> np.ndarray:
        error = layout.error
        scale = self.params.damping + self.params.error_damping * float(error @ error)
        return scale * layout.row_inverse_weight

    def _preferred_step(self, q: np.ndarray, posture: np.ndarray) -> np.ndarray:
        dq_p = pin.difference(self.model, q, posture)
        dq_p *= self.params.posture_gain
        dq_p[:6] = 0.0
        gain = max(self._pelvis_weight * self.params.pelvis_gain, self.params.pelvis_level_gain)
        if gain:  # a leg reaching down (stairs): the pelvis kept upright (Parameters.pelvis_gain)
            rotation = pin.Quaternion(q[3:7]).toRotationMatrix()
            upright = rotation_z(math.atan2(rotation[1, 0], rotation[0, 0]))
            dq_p[3:6] = gain * pin.log3(rotation.T @ upright)  # to the upright base of its yaw (local frame)
        return dq_p

    def _reach_weight(self, targets: IKTargets) -> float:
        """Weight in [0, 1] of the pelvis preference for ``targets`` (:class:`IKSolver.Parameters`
        ``pelvis_gain``): how far the CoM target is above its reference height over the lower sole target
        (biped walking targets), from ``pelvis_reach_start`` (0) to ``pelvis_reach_full`` (1)."""
        p = self.params
        com = targets.com_position
        if not p.pelvis_gain or self._sole_keys is None or com is None:
            return 0.0
        heights = [targets.foot_positions[key][2] for keys in self._sole_keys for key in keys
                   if key in targets.foot_positions]
        if len(heights) != 2:
            return 0.0
        reach = float(com[2]) - min(heights) - self._com_height
        if reach <= p.pelvis_reach_start:
            return 0.0
        return min(1.0, (reach - p.pelvis_reach_start) / (p.pelvis_reach_full - p.pelvis_reach_start))

    def _step_bounds(self, q: np.ndarray) -> None:
        limited = q[self._limit_q]
        self._dq_lower[self._limit_v] = self._lower - limited
        self._dq_upper[self._limit_v] = self._upper - limited

    def _initial_configuration(self, q_init) -> np.ndarray:
        """Validated copy of ``q_init`` (unit quaternion, joints clipped to their limits)."""
        if type(q_init) is np.ndarray and q_init.shape == (self.robot.nq,) and q_init.dtype == np.float64:
            q = q_init.copy()  # fast path of RobotModel.check_configuration
            quaternion = q[3:7]
            norm_sq = float(quaternion @ quaternion)
            if not (math.isfinite(float(q @ q)) and norm_sq > 1e-18):
                q = self.robot.check_configuration(q_init, "q_init")
            elif abs(norm_sq - 1.0) > 1e-12:
                quaternion /= math.sqrt(norm_sq)
        else:
            q = self.robot.check_configuration(q_init, "q_init")
        limited = q[self._limit_q]
        np.minimum(limited, self._upper, out=limited)
        np.maximum(limited, self._lower, out=limited)
        if type(self._limit_q) is not slice:
            q[self._limit_q] = limited
        return q

    def _chord_step(self, layout: _Layout, factor: np.ndarray) -> np.ndarray | None:
        """Step with the Jacobian and Cholesky factor of the last full step, without posture.

        Returns None when the step would leave the joint limits or exceed ``max_step``
        (the caller then takes a full step).
        """
        x, info = dpotrs(factor, layout.error)
        if info != 0:
            return None
        dq = layout.jacobian.T @ x
        if float(np.abs(dq).max()) > self.params.max_step or (dq < self._dq_lower).any() or (
            dq > self._dq_upper
        ).any():
            return None
        return dq

    def _solve_step(
        self, jacobian, error, rho, dq_p, dq_lower, dq_upper
    ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray | None]:
        """Damped least-squares step with an active set on the step bounds.

        Returns:
            The step, the joints held at a limit, and the Cholesky factor of
            ``J J^T + diag(rho)`` (None when the active set changed the system).
        """
        max_step = self.params.max_step
        factor = None
        if jacobian.shape[0] == 0:
            dq = dq_p.copy()
        else:
            x, factor = self._damped_solve(jacobian, error - jacobian @ dq_p, rho)
            dq = jacobian.T @ x
            dq += dq_p
        peak = float(np.abs(dq).max())
        if peak > max_step:
            dq *= max_step / peak
        if not ((dq < dq_lower).any() or (dq > dq_upper).any()):
            return dq, (), factor
        free = np.ones(dq.shape[0])
        fixed = np.zeros(dq.shape[0])
        for _ in range(8):  # each round fixes at least one more joint at its limit
            outside = (dq < dq_lower) | (dq > dq_upper)
            if not outside.any():
                break
            free[outside] = 0.0
            fixed[outside] = np.clip(dq[outside], dq_lower[outside], dq_upper[outside])
            if jacobian.shape[0] == 0:
                dq = free * dq_p + fixed
            else:
                masked = jacobian * free
                residual = error - jacobian @ fixed - masked @ dq_p
                dq = free * (dq_p + masked.T @ self._damped_solve(masked, residual, rho)[0]) + fixed
            peak = float(np.abs(dq).max())
            if peak > max_step:
                dq *= max_step / peak
        dq = np.clip(dq, dq_lower, dq_upper)
        return dq, self._limited(free), None

    def _limited(self, free: np.ndarray) -> tuple[str, ...]:
        """Names of the joints whose velocity index has ``free == 0``."""
        at_limit = np.flatnonzero(free == 0.0)
        return tuple(self._joint_of_v[int(i)] for i in at_limit if int(i) in self._joint_of_v)

    @staticmethod
    def _damped_solve(
        jacobian: np.ndarray, rhs: np.ndarray, rho: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Solve (J J^T + diag(rho)) x = rhs by Cholesky; returns x and the (upper) factor."""
        gram = jacobian @ jacobian.T
        gram.flat[:: gram.shape[0] + 1] += rho
        factor, x, info = dposv(gram, rhs, overwrite_a=1, overwrite_b=1)
        if info != 0:  # not positive definite: only with non-finite inputs
            return np.full(rhs.shape, np.nan), None
        return x, factor

    def _result(self, layout, q, success, block_sq, iterations, solve_time, limited, message) -> IKResult:
        norms = np.sqrt(block_sq / layout.inverse_tolerance_sq).tolist()
        n_positions = len(layout.position_slots) + layout.com
        q = q.copy()
        q.setflags(write=False)
        return IKResult(
            q=q,
            success=bool(success),
            residuals=MappingProxyType(dict(zip(layout.names, norms))),
            position_residual=max(norms[:n_positions], default=0.0),
            orientation_residual=max(norms[n_positions:], default=0.0),
            iterations=iterations,
            solve_time=solve_time,
            limited_joints=limited,
            message=message,
        )


def _load_kernel():
    """The compiled steps (:mod:`.ik_kernel`), compiled or loaded from numba's cache now rather than at
    the first solve; None without numba."""
    try:
        from walk_mpc.core.body import ik_kernel
    except ImportError:  # numba not installed: numpy implementation
        return None
    jacobian, factor, step = np.eye(1, 2), np.zeros((1, 1)), np.zeros(2)
    bounds = np.full(2, np.inf)
    ik_kernel.full_step(jacobian, np.ones(1), 1.0, 1.0, np.ones(1), np.zeros(2), -bounds, bounds, 1.0, step,
                        factor, np.ones(2))
    ik_kernel.chord_step(factor, jacobian, np.ones(1), -bounds, bounds, 1.0, step)
    return ik_kernel


def targets_from_configuration(robot: RobotModel, q, torso: bool = True) -> IKTargets:
    """Targets met exactly by ``q``: CoM, foot poses (6D for bipeds, else 3D), torso orientation."""
    feet = robot.foot_poses(q)
    return IKTargets(
        com_position=robot.com(q),
        foot_positions={frame: pose[0] for frame, pose in feet.items()},
        foot_rotations={frame: pose[1] for frame, pose in feet.items()} if robot.is_biped else {},
        torso_orientation=robot.frame_pose(q, robot.torso_frame)[1] if torso else None,
    )

