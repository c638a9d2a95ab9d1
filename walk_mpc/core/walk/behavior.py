"""Walk behavior: the Atlas Stand/Walk state machine over a footstep queue, without ROS.

Contract (mirrors Atlas ``AtlasBehaviorWalkFeedback``; ``N = NUM_REQUIRED_WALK_STEPS = 4``):

* Behaviors STAND and WALK. While walking exactly one substate flag is set: SWAYING
  (weight shift before the first lift-off), STEPPING, or CATCHING (no step left to
  swing: feet stay, CoM goes back between them before Stand). None in Stand. Substate
  flags do not latch.
* Indices: step 0 is the stance when Walk starts, user steps are 1, 2, ... (consecutive).
  ``current_step_index`` is the last step that touched down (0 before the first
  touchdown); it resets to 0 in Stand.
* Decision points: when a goal starts a walk (D_0) and at every touchdown of step ``c``
  (D_c), Walk *looks for* steps ``c+1 .. c+N``. ``N`` is the walk's *look-ahead*: Atlas's 4 unless
  the goal that started or preempted the walk asked for fewer (``submit_goal(..., lookahead=L)``,
  1 <= L <= 4: a velocity walk commits fewer steps ahead so that a new command shows sooner).
  Each step it finds is checked against its predecessor (same foot twice ->
  WALK_ERROR_INCONSISTENT_STEPS, latched until Walk is re-entered), saturated
  (:mod:`.saturation`) and *committed*: committed steps are final, they form
  ``step_queue_saturated`` and the :class:`Timeline` the planner uses.
  A missing step while the plan is open -> WALK_WARNING_INSUFFICIENT_STEP_DATA (does
  not latch: set while catching, cleared in Stand). Both errors stop at step ``c``.
* ``next_step_index_needed`` = last committed index + 1 (``current + 1 + N`` while
  streaming, N the look-ahead): the first index Walk will look for at the next touchdown. Steps with
  index >= it may be added or replaced; lower ones may only be re-sent identically.
  A user re-sending the window ``[next_needed - 3, next_needed]`` every cycle never starves.
* Plan end: a goal or a ``queue_steps`` call says ``plan_complete``. True: the plan ends
  with its last step (uncommitted steps after it are dropped) and the walk ends normally
  after that step's touchdown (result NONE). False: more steps will be queued. Each
  ``queue_steps`` call restates it, so a complete plan may be reopened until its last touchdown.
* Goals: from Stand a goal must start at step 1 and, if open, hold at least N steps (D_0
  happens at once; N its look-ahead). While walking (not stopping) a new goal preempts: the old goal ends
  PREEMPTED and the walk continues without stopping; the new goal's steps up to the last
  committed index must equal the committed ones and its first new step must follow on
  (index last committed + 1, other foot than the last committed step), otherwise the new
  goal is rejected and the old one continues. While stopping (cancel, error, final catch),
  new goals are rejected: send them again after the result.
* Cancel (or :meth:`WalkBehavior.abort`): the swinging step finishes (a step not yet
  lifted off is dropped), then catch, Stand, result CANCELED (or the abort code).
* Every goal gets exactly one outcome: a :class:`Rejection` (in :class:`GoalAnswer`), a
  PREEMPTED result (in the :class:`GoalAnswer` of the preempting goal), a result in the
  :class:`WalkStatus` of the tick that reaches Stand, or the return value of :meth:`reset`.

Invalid user input never raises: it yields a :class:`Rejection` and changes nothing.
Programming errors (non-finite ``dt``) raise :class:`~.errors.InputError`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Union

from walk_mpc.core.errors import InputError, InvalidStepError, ParameterError
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits, saturate_step
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Phase, PhaseKind, Timeline

#: Walk always needs this many steps of data ahead (or the end of the plan).
NUM_REQUIRED_WALK_STEPS = 4

#: Touched-down steps kept in the status timeline of long walks (between this and twice this).
HISTORY_STEPS = 16


class Behavior(enum.IntEnum):
    """Top-level behavior (``WalkFeedback.BEHAVIOR_*``)."""

    STAND = 0
    WALK = 1


class WalkFlags(enum.IntFlag):
    """Bits of ``WalkFeedback.status_flags``."""

    NONE = 0
    WALK_SUBSTATE_SWAYING = 1
    WALK_SUBSTATE_STEPPING = 2
    WALK_SUBSTATE_CATCHING = 4
    WALK_WARNING_INSUFFICIENT_STEP_DATA = 8
    WALK_ERROR_INCONSISTENT_STEPS = 16


SUBSTATE_FLAGS = (
    WalkFlags.WALK_SUBSTATE_SWAYING | WalkFlags.WALK_SUBSTATE_STEPPING | WalkFlags.WALK_SUBSTATE_CATCHING
)


class WalkErrorCode(enum.IntEnum):
    """``Walk.action`` result error codes."""

    NONE = 0
    INCONSISTENT_STEPS = 1
    INSUFFICIENT_STEP_DATA = 2
    INVALID_STEP = 3
    CANCELED = 4
    PREEMPTED = 5
    PLANNER_FAILURE = 6
    IK_FAILURE = 7
    SENSOR_TIMEOUT = 8
    FALL_DETECTED = 9
    LANDING_NOT_MEASURED = 10  # the clock completed the steps, the contact forces did not see them land
    DEADLINES_MISSED = 11  # too many commands came after their control deadline (the sim's deadlines)


@dataclasses.dataclass(frozen=True)
class Rejection:
    """Why a goal or a ``queue_steps`` request was refused (nothing changed).

    Attributes:
        error_code: Result code to report.
        message: Human-readable reason.
        step_index: Offending step index, -1 when the request as a whole is at fault.
    """

    error_code: WalkErrorCode
    message: str
    step_index: int = -1


@dataclasses.dataclass(frozen=True)
class WalkResult:
    """Outcome of an accepted goal (``Walk.action`` result).

    Attributes:
        goal_id: The goal this result belongs to.
        error_code: NONE on a normal finish.
        error_msg: Human-readable outcome.
        last_completed_step_index: Last step that touched down under this walk (0 if none).
        offending_step_indices: Steps at fault (the same-foot pair, the missing step), else empty.
    """

    goal_id: Hashable
    error_code: WalkErrorCode
    error_msg: str
    last_completed_step_index: int
    offending_step_indices: Tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class GoalAnswer:
    """Answer to :meth:`WalkBehavior.submit_goal`.

    Attributes:
        goal_id: Id of the submitted goal.
        accepted: Whether the goal now runs.
        rejection: Why it was refused (None when accepted).
        preempted: Result of the goal it preempted (None when nothing was preempted).
    """

    goal_id: Hashable
    accepted: bool
    rejection: Optional[Rejection] = None
    preempted: Optional[WalkResult] = None


@dataclasses.dataclass(frozen=True)
class QueueAnswer:
    """Answer to :meth:`WalkBehavior.queue_steps` (``QueueSteps.srv`` response plus a code).

    Attributes:
        accepted: Whether the steps were taken (identical re-sends count as accepted).
        message: What happened, or why the request was refused.
        next_step_index_needed: Value after the request (0 in Stand).
        error_code: NONE when accepted, else the rejection code.
        step_index: Offending step index when refused, else -1.
    """

    accepted: bool
    message: str
    next_step_index_needed: int
    error_code: WalkErrorCode = WalkErrorCode.NONE
    step_index: int = -1


@dataclasses.dataclass(frozen=True)
class WalkStatus:
    """Walk feedback for one tick.

    Attributes:
        t: Time of this status [s].
        behavior: STAND or WALK.
        t_step_rem: Time until the next touchdown [s] while swaying or stepping, else 0.
        current_step_index: Last step that touched down (0 before the first one and in Stand).
        next_step_index_needed: First index Walk looks for at the next touchdown (0 in Stand).
        status_flags: Bit-wise OR of :class:`WalkFlags`.
        step_queue_saturated: Saturated committed steps after ``current_step_index`` (at most N).
        step_saturation: One :class:`SaturationFlags` per ``step_queue_saturated`` entry.
        goal_id: Active goal (None in Stand).
        timeline: Plan of the walk (committed steps), or a standing timeline in Stand. In walks of
            more than ``2 * HISTORY_STEPS`` steps it starts ``HISTORY_STEPS`` to twice that many
            steps back, with a SWAY phase standing for the older history: every phase from the
            first kept lift-off on (so at and after ``t``) is exact; do not query older times.
        phase: Phase of ``timeline`` at ``t``.
        left: Desired left sole pose (touchdown pose while it swings).
        right: Desired right sole pose.
        support_foot: Foot carrying the weight in single support, None in double support.
        desired_support_foot_pose: Planned pose of ``support_foot`` (None in double support).
        measured_support_foot_pose: Pose passed to :meth:`WalkBehavior.step` (None if not given).
        result: Result of the goal that finished during this tick, else None.
    """

    t: float
    behavior: Behavior
    t_step_rem: float
    current_step_index: int
    next_step_index_needed: int
    status_flags: WalkFlags
    step_queue_saturated: Tuple[Step, ...]
    step_saturation: Tuple[SaturationFlags, ...]
    goal_id: Optional[Hashable]
    timeline: Timeline
    phase: Phase
    left: FootPose
    right: FootPose
    support_foot: Optional[Foot]
    desired_support_foot_pose: Optional[FootPose]
    measured_support_foot_pose: Optional[FootPose] = None
    result: Optional[WalkResult] = None

    @property
    def substate(self) -> WalkFlags:
        """The substate bit alone (NONE in Stand)."""
        return self.status_flags & SUBSTATE_FLAGS


StepLike = Union[Step, Mapping[str, Any]]

_RECORD_KEYS = ("step_index", "foot_index", "duration", "position", "yaw", "normal", "swing_height")


def step_from_record(record: Mapping[str, Any]) -> Step:
    """Build a :class:`Step` from ``StepData`` field names (``foot_index`` or ``foot``).

    An all-zero ``normal`` is read as (0, 0, 1), as in ``msg/StepData``.

    Raises:
        InvalidStepError: On missing or unknown fields, bad foot or non-finite numbers.
    """
    if not isinstance(record, Mapping):
        raise InvalidStepError(-1, f"step record {record!r} is not a mapping")
    fields = dict(record)
    index = fields.get("step_index", -1)
    index = index if isinstance(index, int) and not isinstance(index, bool) else -1
    if "foot" in fields and "foot_index" not in fields:
        fields["foot_index"] = fields.pop("foot")
    unknown = sorted(set(fields) - set(_RECORD_KEYS))
    if unknown:
        raise InvalidStepError(index, f"unknown fields {unknown}; valid fields are {list(_RECORD_KEYS)}")
    missing = [key for key in ("step_index", "foot_index", "duration", "position") if key not in fields]
    if missing:
        raise InvalidStepError(index, f"missing fields {missing}")
    normal = fields.get("normal", (0.0, 0.0, 1.0))
    try:
        if all(float(v) == 0.0 for v in normal):
            normal = (0.0, 0.0, 1.0)
    except (TypeError, ValueError):
        pass  # Step reports it
    try:
        return Step(
            step_index=fields["step_index"],
            foot=fields["foot_index"],
            duration=fields["duration"],
            position=fields["position"],
            yaw=fields.get("yaw", 0.0),
            normal=normal,
            swing_height=fields.get("swing_height", 0.05),
        )
    except InvalidStepError:
        raise
    except (TypeError, ValueError) as exc:
        raise InvalidStepError(index, f"malformed step record: {exc}") from exc


def steps_from_records(records: Sequence[StepLike]) -> Union[Tuple[Step, ...], Rejection]:
    """Validate a goal's or request's steps.

    Args:
        records: :class:`Step` objects or mappings with ``StepData`` field names.

    Returns:
        The steps, or a :class:`Rejection` for: no step, a malformed step (non-finite number,
        foot not 0/1, missing field), an index below 1, indices that do not increase by exactly 1.
    """
    try:
        records = list(records) if records is not None else []
    except TypeError:
        return Rejection(WalkErrorCode.INVALID_STEP, f"steps {records!r} is not a list of steps")
    if not records:
        return Rejection(WalkErrorCode.INSUFFICIENT_STEP_DATA, "no steps given")
    steps: List[Step] = []
    for record in records:
        try:
            step = record if isinstance(record, Step) else step_from_record(record)
        except InvalidStepError as exc:
            return Rejection(WalkErrorCode.INVALID_STEP, str(exc), exc.step_index)
        if step.step_index < 1:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"step_index {step.step_index} is invalid: user steps start at 1",
                             step.step_index)
        if steps and step.step_index <= steps[-1].step_index:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"step_index {step.step_index} does not increase after {steps[-1].step_index}",
                             step.step_index)
        if steps and step.step_index != steps[-1].step_index + 1:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"step_index {step.step_index} skips indices after {steps[-1].step_index}; "
                             "expected consecutive indices", step.step_index)
        steps.append(step)
    return tuple(steps)


class WalkBehavior:
    """Atlas-style Walk behavior over a footstep queue (see the module docstring for the contract).

    Args:
        params: Timing and step limits.
        left: Initial left sole pose (standing).
        right: Initial right sole pose (standing).
        t: Initial time [s].
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Walk behavior parameters.

        Attributes:
            timing: Sway, double support and catch durations [s].
            limits: Step limits used for saturation.
        """

        timing: GaitTiming = dataclasses.field(default_factory=GaitTiming)
        limits: StepLimits = dataclasses.field(default_factory=StepLimits)

        def __post_init__(self) -> None:
            if not isinstance(self.timing, GaitTiming):
                raise ParameterError("timing", self.timing, "a GaitTiming")
            if not isinstance(self.limits, StepLimits):
                raise ParameterError("limits", self.limits, "a StepLimits")
            if self.limits.min_duration <= self.timing.double_support_duration:
                raise ParameterError(
                    "limits.min_duration", self.limits.min_duration,
                    f"more than timing.double_support_duration = {self.timing.double_support_duration}",
                )

    def __init__(
        self,
        params: Optional[WalkBehavior.Parameters] = None,
        left: FootPose = FootPose((0.0, 0.1, 0.0)),
        right: FootPose = FootPose((0.0, -0.1, 0.0)),
        t: float = 0.0,
    ) -> None:
        self.params = params if params is not None else WalkBehavior.Parameters()
        self._goal_counter = 0
        self._t = float(t)
        self._left = left
        self._right = right
        self._enter_stand(self._standing_timeline(left, right))
        self._error_flags = WalkFlags.NONE

    # ------------------------------------------------------------------ state helpers

    def _standing_timeline(self, left: FootPose, right: FootPose) -> Timeline:
        timing = self.params.timing
        return Timeline(left, right, [], timing, t0=self._t - timing.sway_duration - timing.catch_duration)

    def _enter_stand(self, timeline: Timeline) -> None:
        self._behavior = Behavior.STAND
        self._goal_id: Optional[Hashable] = None
        self._timeline = timeline
        self._touchdown: Dict[int, float] = {}  # touchdown time [s] of the timeline's steps
        self._liftoff: Dict[int, float] = {}  # lift-off time [s] of the timeline's steps
        self._anchor = 0  # the timeline starts with the feet after this step (0: walk start)
        self._anchor_feet = {Foot.LEFT: self._left, Foot.RIGHT: self._right}
        self._anchor_t0 = self._t
        self._start_feet = {Foot.LEFT: self._left, Foot.RIGHT: self._right}
        self._committed: List[Step] = []
        self._committed_raw: List[Step] = []
        self._committed_flags: List[SaturationFlags] = []
        self._store: Dict[int, Step] = {}
        self._plan_complete = True
        self._plan_end: Optional[int] = None
        self._current = 0
        self._lookahead = NUM_REQUIRED_WALK_STEPS  # steps committed ahead at each decision
        self._outcome: Optional[Tuple[WalkErrorCode, str, Tuple[int, ...]]] = None
        self._warning = False
        self._timing = self.params.timing  # of the walk (submit_goal's timing)
        self._limits = self.params.limits  # of the walk (submit_goal's limits)

    def _rebuild_timeline(self) -> None:
        """Timeline of the committed steps, re-anchored in long walks so rebuilds stay O(1) per touchdown."""
        if self._current - self._anchor >= 2 * HISTORY_STEPS:
            anchor = self._current - HISTORY_STEPS
            liftoff = self._liftoff[anchor + 1]  # of the first step kept, in the timeline being replaced
            feet = dict(self._anchor_feet)
            for step in self._committed[self._anchor:anchor]:
                feet[step.foot] = FootPose.of_step(step)
            self._anchor, self._anchor_feet = anchor, feet
            self._anchor_t0 = liftoff - self._timing.sway_duration
        self._timeline = Timeline(self._anchor_feet[Foot.LEFT], self._anchor_feet[Foot.RIGHT],
                                  self._committed[self._anchor:], self._timing, t0=self._anchor_t0)
        singles = [p for p in self._timeline.phases if p.kind is PhaseKind.SINGLE]
        self._touchdown = {p.step_index: p.t_end for p in singles}
        self._liftoff = {p.step_index: p.t_start for p in singles}

    @property
    def _last_committed(self) -> int:
        return len(self._committed)  # committed steps are exactly 1..n

    def _new_goal_id(self, goal_id: Optional[Hashable]) -> Hashable:
        if goal_id is not None:
            return goal_id
        self._goal_counter += 1
        return self._goal_counter

    # ------------------------------------------------------------------ public API

    @property
    def time(self) -> float:
        """Current time [s]."""
        return self._t

    @property
    def behavior(self) -> Behavior:
        """Current behavior."""
        return self._behavior

    @property
    def goal_id(self) -> Optional[Hashable]:
        """Active goal, None in Stand."""
        return self._goal_id

    @property
    def next_step_index_needed(self) -> int:
        """First index Walk looks for at the next touchdown (0 in Stand)."""
        return self._last_committed + 1 if self._behavior is Behavior.WALK else 0

    @property
    def lookahead(self) -> int:
        """Steps the walk commits ahead at each decision (``NUM_REQUIRED_WALK_STEPS`` in Stand)."""
        return self._lookahead

    @property
    def is_stopping(self) -> bool:
        """Whether the walk has decided to end (cancel, error or plan end); False in Stand."""
        return self._outcome is not None

    @property
    def feet(self) -> Tuple[FootPose, FootPose]:
        """Standing (left, right) sole poses: current in Stand, at the start of the walk while walking."""
        return self._start_feet[Foot.LEFT], self._start_feet[Foot.RIGHT]

    @property
    def status(self) -> WalkStatus:
        """Status at the current time, without advancing it (``result`` is None)."""
        return self._make_status(None, None)

    def submit_goal(
        self,
        steps: Sequence[StepLike],
        plan_complete: bool = True,
        goal_id: Optional[Hashable] = None,
        lookahead: Optional[int] = None,
        timing: Optional[GaitTiming] = None,
        limits: Optional[StepLimits] = None,
    ) -> GoalAnswer:
        """Start a walk, or preempt the running goal.

        Args:
            steps: Steps (or ``StepData``-like mappings) with consecutive indices.
            plan_complete: True if these are all the steps; False if more will be queued.
            goal_id: Id reported in results; an increasing integer when None.
            lookahead: Steps committed ahead at each decision from now on [steps], 1 to
                ``NUM_REQUIRED_WALK_STEPS``; None: ``NUM_REQUIRED_WALK_STEPS`` (Atlas).
            timing: Gait timing of a walk from Stand (a recovery step's quick sway); None: the parameters'.
                A preempting goal keeps the timing of the walk it continues.
            limits: Step limits of a walk from Stand (a recovery's crossover step); None: the parameters'. A
                preempting goal keeps the limits of the walk it continues.

        Returns:
            The answer; on rejection nothing changed.

        Raises:
            InputError: If ``lookahead`` is not an integer in [1, NUM_REQUIRED_WALK_STEPS], or ``timing`` not
                a GaitTiming whose double support is shorter than the limits' ``min_duration``, or ``limits``
                not a StepLimits.
        """
        lookahead = NUM_REQUIRED_WALK_STEPS if lookahead is None else lookahead
        if (isinstance(lookahead, bool) or not isinstance(lookahead, int)
                or not 1 <= lookahead <= NUM_REQUIRED_WALK_STEPS):
            raise InputError("lookahead", lookahead, f"an integer in [1, {NUM_REQUIRED_WALK_STEPS}] steps")
        if timing is not None and (not isinstance(timing, GaitTiming)
                                   or timing.double_support_duration >= self.params.limits.min_duration):
            raise InputError("timing", timing, "a GaitTiming whose double support is shorter than "
                             f"limits.min_duration = {self.params.limits.min_duration} s")
        if limits is not None and not isinstance(limits, StepLimits):
            raise InputError("limits", limits, "a StepLimits")
        gid = self._new_goal_id(goal_id)
        parsed = steps_from_records(steps)
        if isinstance(parsed, Rejection):
            return GoalAnswer(gid, False, parsed)
        if self._behavior is Behavior.STAND:
            rejection = self._check_fresh_goal(parsed, plan_complete, lookahead)
            if rejection is not None:
                return GoalAnswer(gid, False, rejection)
            self._start_walk(gid, parsed, bool(plan_complete), lookahead, timing, limits)
            return GoalAnswer(gid, True)
        rejection = self._check_continuation(parsed, plan_complete, preempting=True)
        if rejection is not None:
            return GoalAnswer(gid, False, rejection)
        preempted = WalkResult(self._goal_id, WalkErrorCode.PREEMPTED, f"preempted by goal {gid!r}",
                               self._current)
        self._goal_id = gid
        self._lookahead = lookahead
        self._store = {}
        self._install(parsed, bool(plan_complete))
        return GoalAnswer(gid, True, preempted=preempted)

    def queue_steps(self, steps: Sequence[StepLike], plan_complete: bool = False) -> QueueAnswer:
        """Add or replace steps of the running walk (``walk/queue_steps``).

        Steps with index < ``next_step_index_needed`` are committed: re-sending them
        identically is accepted and changes nothing (also while the walk is stopping),
        changing them is refused. Later steps are added or replaced. The whole request
        is refused if any step is.

        Args:
            steps: Steps (or ``StepData``-like mappings) with consecutive indices.
            plan_complete: True if the plan ends with the last of these steps.

        Returns:
            The answer; on refusal nothing changed.
        """
        def refuse(rejection: Rejection) -> QueueAnswer:
            return QueueAnswer(False, rejection.message, self.next_step_index_needed,
                               rejection.error_code, rejection.step_index)

        if self._behavior is not Behavior.WALK:
            return refuse(Rejection(WalkErrorCode.INVALID_STEP, "not walking: send a walk goal first"))
        parsed = steps_from_records(steps)
        if isinstance(parsed, Rejection):
            return refuse(parsed)
        if self._outcome is not None and self._is_committed_resend(parsed):
            return QueueAnswer(True, f"{len(parsed)} unchanged; walk is stopping ({self._outcome[1]})",
                               self.next_step_index_needed)
        rejection = self._check_continuation(parsed, plan_complete, preempting=False)
        if rejection is not None:
            return refuse(rejection)
        added, replaced, unchanged = self._install(parsed, bool(plan_complete))
        end = f"; plan ends at step {self._plan_end}" if self._plan_complete else "; plan open"
        return QueueAnswer(True, f"{added} added, {replaced} replaced, {unchanged} unchanged{end}",
                           self.next_step_index_needed)

    def adjust_steps(self, steps: Sequence[Step]) -> Tuple[int, ...]:
        """Move committed steps that have not touched down (step adjustment from the measured DCM): each of
        ``steps`` whose index is committed and after the current step replaces the committed step where it
        lands (position and yaw) and its duration (step timing adaptation; index, foot and swing height
        stay). Nothing else changes: the indices stay committed, ``step_queue_saturated`` and the timeline
        show the moved steps, the steps the user sent (and may re-send identically) stay as sent. The caller
        keeps the moved steps within the step limits
        (:func:`~walk_mpc.core.control.step_adjustment.adjusted_steps`) and a shortened step's touchdown
        after the current time.

        Returns:
            The indices of the steps moved (none while standing or stopping after the last step).
        """
        if self._behavior is not Behavior.WALK:
            return ()
        moved = []
        for step in steps:
            k = step.step_index - 1
            if not self._current < step.step_index <= self._last_committed:
                continue
            committed = self._committed[k]
            same = (step.position == committed.position and step.yaw == committed.yaw
                    and step.duration == committed.duration)
            if step.foot != committed.foot or same:
                continue
            self._committed[k] = committed.replace(position=step.position, yaw=step.yaw,
                                                   duration=step.duration)
            previous = (FootPose.of_step(self._committed[k - 1]) if k > 0
                        else self._start_feet[step.foot.other])
            self._committed_flags[k] = saturate_step(self._committed_raw[k], previous, self._limits)[1]
            moved.append(step.step_index)
        if moved:
            self._rebuild_timeline()
        return tuple(moved)

    def cancel(self, goal_id: Optional[Hashable] = None) -> bool:
        """Request the active goal to stop: finish the swinging step, catch, stand, result CANCELED.

        Args:
            goal_id: Goal to cancel; None means the active one.

        Returns:
            False if there is no such active goal or it is already ending on its own.
        """
        return self.abort(WalkErrorCode.CANCELED, "canceled", goal_id)

    def abort(self, error_code: WalkErrorCode, message: str, goal_id: Optional[Hashable] = None) -> bool:
        """Stop the walk like :meth:`cancel` with another result code (planner/IK failure, sensor timeout).

        Returns:
            False if there is no such active goal or it is already ending.

        Raises:
            InputError: If ``error_code`` is not a :class:`WalkErrorCode` value.
        """
        try:
            error_code = WalkErrorCode(error_code)
        except ValueError:
            raise InputError("error_code", error_code, f"one of {[int(c) for c in WalkErrorCode]}") from None
        if self._behavior is not Behavior.WALK or self._outcome is not None:
            return False
        if goal_id is not None and goal_id != self._goal_id:
            return False
        phase = self._timeline.phase_at(self._t)
        keep = phase.step_index if phase.kind is PhaseKind.SINGLE else self._current
        self._stop(error_code, str(message), (), keep)
        return True

    def step(self, dt: float, measured_support_foot_pose: Optional[FootPose] = None) -> WalkStatus:
        """Advance time by ``dt`` [s], handle the touchdowns on the way, and report.

        Args:
            dt: Time step [s], finite and >= 0.
            measured_support_foot_pose: Support-foot pose measured by the caller, echoed in the status.

        Raises:
            InputError: If ``dt`` is not a finite non-negative number.
        """
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt < 0.0:
            raise InputError("dt", dt, "a finite number of seconds >= 0")
        t_new = self._t + dt
        result = None
        if self._behavior is Behavior.WALK:
            while self._current < self._last_committed and self._touchdown[self._current + 1] <= t_new:
                self._current += 1
                self._decide()
            if t_new >= self._timeline.t_end:
                result = self._finish()
        self._t = t_new
        return self._make_status(result, measured_support_foot_pose)

    def reset(
        self, left: Optional[FootPose] = None, right: Optional[FootPose] = None
    ) -> Optional[WalkResult]:
        """Go to Stand at once, at the given feet (default: the current planned feet), clearing all flags.

        Returns:
            The result (CANCELED) of the goal that was active, else None.
        """
        result = None
        if self._behavior is Behavior.WALK:
            phase = self._timeline.phase_at(self._t)
            result = WalkResult(self._goal_id, WalkErrorCode.CANCELED, "reset", self._current)
            left = left if left is not None else phase.left
            right = right if right is not None else phase.right
        self._left = left if left is not None else self._left
        self._right = right if right is not None else self._right
        self._error_flags = WalkFlags.NONE
        self._enter_stand(self._standing_timeline(self._left, self._right))
        return result

    # ------------------------------------------------------------------ goal handling

    def _check_fresh_goal(self, steps: Tuple[Step, ...], plan_complete: bool,
                          lookahead: int = NUM_REQUIRED_WALK_STEPS) -> Optional[Rejection]:
        if steps[0].step_index != 1:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"a walk from Stand starts at step_index 1, got {steps[0].step_index}",
                             steps[0].step_index)
        if not plan_complete and len(steps) < lookahead:
            return Rejection(WalkErrorCode.INSUFFICIENT_STEP_DATA,
                             f"an open goal (plan_complete false) needs at least {lookahead} "
                             f"steps, got {len(steps)}")
        return None

    def _is_committed_resend(self, steps: Tuple[Step, ...]) -> bool:
        """Whether every step is a committed one, sent again identically."""
        last = self._last_committed
        return all(s.step_index <= last and s == self._committed_raw[s.step_index - 1] for s in steps)

    def _check_continuation(self, steps: Tuple[Step, ...], plan_complete: bool,
                            preempting: bool) -> Optional[Rejection]:
        """Rejection if ``steps`` cannot be merged into the running walk, else None."""
        if self._outcome is not None:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"walk is stopping ({self._outcome[1]}); send steps again in Stand")
        last = self._last_committed
        for step in steps:
            if step.step_index > last:
                break
            if step != self._committed_raw[step.step_index - 1]:
                return Rejection(WalkErrorCode.INVALID_STEP,
                                 f"step {step.step_index} is committed (steps up to {last} are touched down, "
                                 "swinging or in the saturated queue) and cannot be changed", step.step_index)
        if plan_complete and steps[-1].step_index < last:
            return Rejection(WalkErrorCode.INVALID_STEP,
                             f"the plan cannot end at step {steps[-1].step_index}: steps up to {last} "
                             "are committed", steps[-1].step_index)
        if preempting:
            new = [s for s in steps if s.step_index > last]
            if new and new[0].step_index != last + 1:
                return Rejection(WalkErrorCode.INVALID_STEP,
                                 f"a preempting goal must continue at step {last + 1} "
                                 f"(next_step_index_needed), got {new[0].step_index}", new[0].step_index)
            if new and last > 0 and new[0].foot == self._committed[-1].foot:
                return Rejection(WalkErrorCode.INCONSISTENT_STEPS,
                                 f"step {new[0].step_index} uses foot {int(new[0].foot)} like committed step "
                                 f"{last}; a preempting goal must alternate from the current plan",
                                 new[0].step_index)
        return None

    def _install(self, steps: Tuple[Step, ...], plan_complete: bool) -> Tuple[int, int, int]:
        """Store the uncommitted ``steps`` and the plan end; counts (added, replaced, unchanged)."""
        last = self._last_committed
        added = replaced = unchanged = 0
        for step in steps:
            if step.step_index <= last:
                unchanged += 1
            elif step.step_index not in self._store:
                added += 1
            elif self._store[step.step_index] == step:
                unchanged += 1
            else:
                replaced += 1
            if step.step_index > last:
                self._store[step.step_index] = step
        self._plan_complete = plan_complete
        if plan_complete:
            self._plan_end = steps[-1].step_index
            for index in [i for i in self._store if i > self._plan_end]:
                del self._store[index]
        else:
            self._plan_end = None
        return added, replaced, unchanged

    def _start_walk(self, goal_id: Hashable, steps: Tuple[Step, ...], plan_complete: bool,
                    lookahead: int = NUM_REQUIRED_WALK_STEPS, timing: Optional[GaitTiming] = None,
                    limits: Optional[StepLimits] = None) -> None:
        self._enter_stand(self._timeline)  # clean per-walk state
        self._timing = timing if timing is not None else self.params.timing
        self._limits = limits if limits is not None else self.params.limits
        self._behavior = Behavior.WALK
        self._goal_id = goal_id
        self._lookahead = lookahead
        self._error_flags = WalkFlags.NONE  # Walk is re-entered
        self._anchor_t0 = self._t
        self._start_feet = {Foot.LEFT: self._left, Foot.RIGHT: self._right}
        self._install(steps, plan_complete)
        self._decide()

    # ------------------------------------------------------------------ decisions

    def _decide(self) -> None:
        """Decision point at the touchdown of ``self._current`` (or the start of the walk)."""
        if self._outcome is not None:
            return
        c = self._current
        want = c + self._lookahead
        index = self._last_committed + 1
        committed_any = False
        while index <= want:
            step = self._store.get(index)
            if step is None:
                if self._plan_complete and self._plan_end is not None and index > self._plan_end:
                    break
                self._warning = True
                self._stop(WalkErrorCode.INSUFFICIENT_STEP_DATA,
                           f"step {index} missing at the touchdown of step {c} (Walk needs steps "
                           f"up to {want} or the end of the plan)", (index,), c)
                return
            previous = self._committed[-1] if self._committed else None
            if previous is not None and previous.foot == step.foot:
                self._error_flags |= WalkFlags.WALK_ERROR_INCONSISTENT_STEPS
                self._stop(WalkErrorCode.INCONSISTENT_STEPS,
                           f"steps {previous.step_index} and {index} both use foot {int(step.foot)}; "
                           "expected alternating feet", (previous.step_index, index), c)
                return
            previous_pose = (FootPose.of_step(previous) if previous is not None
                             else self._start_feet[step.foot.other])
            saturated, flags = saturate_step(step, previous_pose, self._limits)
            self._committed.append(saturated)
            self._committed_raw.append(step)
            self._committed_flags.append(flags)
            del self._store[index]
            committed_any = True
            index += 1
        if committed_any or c == 0:
            self._rebuild_timeline()
        if self._last_committed == c:
            self._outcome = (WalkErrorCode.NONE, "walk finished", ())

    def _stop(self, code: WalkErrorCode, message: str, offending: Tuple[int, ...], keep: int) -> None:
        """Decide to end the walk after step ``keep``: drop later steps, catch, then Stand."""
        del self._committed[keep:]
        del self._committed_raw[keep:]
        del self._committed_flags[keep:]
        self._store.clear()
        self._outcome = (code, message, offending)
        self._rebuild_timeline()

    def _finish(self) -> WalkResult:
        code, message, offending = self._outcome if self._outcome is not None else (
            WalkErrorCode.NONE, "walk finished", ())
        result = WalkResult(self._goal_id, code, message, self._current, offending)
        final = self._timeline.phases[-1]
        self._left, self._right = final.left, final.right
        self._enter_stand(self._timeline)
        return result

    # ------------------------------------------------------------------ status

    def _substate(self, phase: Phase) -> WalkFlags:
        if self._outcome is not None and self._last_committed <= self._current:
            return WalkFlags.WALK_SUBSTATE_CATCHING
        if phase.kind is PhaseKind.SWAY:
            return WalkFlags.WALK_SUBSTATE_SWAYING
        if phase.kind in (PhaseKind.SINGLE, PhaseKind.DOUBLE):
            return WalkFlags.WALK_SUBSTATE_STEPPING
        return WalkFlags.WALK_SUBSTATE_CATCHING

    def _make_status(self, result: Optional[WalkResult],
                     measured: Optional[FootPose]) -> WalkStatus:
        t = self._t
        phase = self._timeline.phase_at(t)
        flags = self._error_flags
        t_step_rem = 0.0
        if self._behavior is Behavior.WALK:
            substate = self._substate(phase)
            flags |= substate
            if self._warning:
                flags |= WalkFlags.WALK_WARNING_INSUFFICIENT_STEP_DATA
            if substate != WalkFlags.WALK_SUBSTATE_CATCHING and self._current < self._last_committed:
                t_step_rem = max(0.0, self._touchdown[self._current + 1] - t)
        first, last = self._current, self._current + NUM_REQUIRED_WALK_STEPS
        support = phase.swing_foot.other if phase.kind is PhaseKind.SINGLE else None
        return WalkStatus(
            t=t,
            behavior=self._behavior,
            t_step_rem=t_step_rem,
            current_step_index=self._current,
            next_step_index_needed=self.next_step_index_needed,
            status_flags=flags,
            step_queue_saturated=tuple(self._committed[first:last]),
            step_saturation=tuple(self._committed_flags[first:last]),
            goal_id=self._goal_id,
            timeline=self._timeline,
            phase=phase,
            left=phase.left,
            right=phase.right,
            support_foot=support,
            desired_support_foot_pose=phase.foot(support) if support is not None else None,
            measured_support_foot_pose=measured,
            result=result,
        )
