"""Footsteps and their timing: steps, gait timelines, the Atlas-style walk behavior and step saturation.

Modules:
    step: :class:`Step` (one footstep, Atlas ``StepData``) and :class:`Foot`.
    timeline: :class:`Timeline` of double/single support phases built from steps and a :class:`GaitTiming`.
    behavior: :class:`WalkBehavior`, the step queue and ``AtlasBehaviorWalkFeedback`` semantics (seed 000).
    saturation: :class:`StepLimits` and :func:`saturate_step` (``step_queue_saturated``).
    footsteps: footstep generators (straight, turning, sideways walks, to a goal pose).
    velocity: :class:`VelocityWalk`, a cmd_vel twist as footsteps streamed through the step queue.
"""
