"""The control loop, written once: the controllers of every tick, shared by the nodes and the in-process loop.

Every decision of a tick lives here; the nodes (:mod:`walk_mpc.nodes`) only convert messages to these types,
call one method per callback and publish. A test drives the node objects and :class:`ClosedLoopWalk` with
the same samples and finds identical commands (``test/test_graph_equivalence.py``).

Modules:
    types: the core types between the stages (:class:`WalkPlan`, :class:`CoMReference`,
        :class:`JointCommand`, statuses, the :class:`Log` protocol).
    stamps: :class:`StampGuard`, sample stamps checked against the steady clock (a rogue stamp cannot
        poison the time base).
    walk_supervisor: :class:`WalkSupervisor`, the walk behavior on the sensor time base with outages,
        liveness of the chain and measured landings (the ``walk_behavior`` node).
    landings: :class:`LandingMonitor`, lift-offs, touchdowns and landing errors from the contact forces.
    planner_stage: :class:`PlannerStage`, samples + plan -> CoM references (the ``mpc_planner`` node).
    whole_body_stage: :class:`WholeBodyStage`, references + samples -> joint commands (the ``ik`` node).
    closed_loop: :class:`ClosedLoopWalk`, the stages on a simulator backend in one process.
    fault_drill: :class:`DrillGraph`, the three controllers wired as the graph on a simulator backend, a node
        killed and restarted (issue 17's in-process drill: ``test_fault_drill``, ``benchmarks/faults.py``).
    capturability: N-step capture regions of the LIPM with rectangular soles and box step limits, the largest
        capturable push (an analysis: ``benchmarks/capture_limit.py``; no controller calls it).
"""
