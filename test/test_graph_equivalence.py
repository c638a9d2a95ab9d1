"""The graph's nodes and the in-process loop run one control loop: identical commands on a 10-step walk.

The ``sim``, ``mpc_planner`` and ``ik`` node objects (their own callbacks, messages and conversions) are
driven in one process in the order the in-process :class:`ClosedLoopWalk` calls the core stages (sample to
the ik, then to the planner, its reference to the ik, the announcement of the next tick to the ik), on two
identical plants. Every joint trajectory the ik node publishes equals the loop's command bit for bit, and
both plants end in the same state: the nodes decide nothing the core does not.

Two walks: 10 steps on the kinematic plant; 3 steps on MuJoCo with the whole-body stage's stabilizer enabled
in the loop and in the ik node (its parameters from ``IKNodeParameters.stabilizer``: the stabilizer is a part
of the core stage, observed on every sample and applied on every tick alike).
"""

from __future__ import annotations

import numpy as np
import pytest

from walk_mpc.core.control.closed_loop import ORIGIN_NS, ClosedLoopWalk, default_planner_parameters
from walk_mpc.core.control.stabilizer import StabilizerParameters
from walk_mpc.core.sim.kinematic import KinematicSim

pytestmark = pytest.mark.ros


def run_graph_and_loop(talos, timeline, make_sim, stabilizer=None):
    """The walk of ``timeline`` by the in-process loop and by the node objects, each on its own plant from
    ``make_sim()``; returns (the ik node's trajectories, the loop, the graph's plant, the loop's plant)."""
    import rclpy
    from builtin_interfaces.msg import Time

    from walk_mpc.nodes.conversions import plan_to_msg
    from walk_mpc.nodes.ik import IKNode, IKNodeParameters
    from walk_mpc.nodes.mpc_planner import MpcPlannerNode, MpcPlannerNodeParameters
    from walk_mpc.nodes.sim import SimNode, SimNodeParameters

    loop_sim = make_sim()
    options = {"whole_body": {"stabilizer": stabilizer}} if stabilizer is not None else None
    loop = ClosedLoopWalk(talos, loop_sim, timeline, **({"stage_options": options} if options else {}))
    loop.keep_commands = True

    graph_sim = make_sim()
    planner_params = default_planner_parameters(talos, np.array(graph_sim.state.q), 0.02)
    context = rclpy.Context()
    rclpy.init(context=context)
    nodes = []
    try:
        sim = SimNode(SimNodeParameters(latency_topic=""), context=context)
        nodes.append(sim)
        sim._timer.cancel()
        sim.backend, sim._start_ns = graph_sim, ORIGIN_NS
        planner = MpcPlannerNode(MpcPlannerNodeParameters(planner=planner_params, robot=talos.params,
                                                          publish_preview_every=0), context=context)
        nodes.append(planner)
        extra = {"stabilizer": stabilizer} if stabilizer is not None else {}
        ik = IKNode(IKNodeParameters(robot=talos.params, **extra), context=context)
        nodes.append(ik)
        for node in (sim, planner, ik):
            node._steady_ns = lambda: None  # in process: the stamps' order only, as ClosedLoopWalk
        samples, references, announced, trajectories = [], [], [], []
        sim._sensor_pub.publish = samples.append
        sim._fall_pub.publish = lambda msg: None
        planner._reference_pub.publish = references.append
        planner._reference_ahead_pub.publish = announced.append
        planner._timing_pub.publish = lambda msg: None

        def deliver(msg):
            trajectories.append(msg)
            sim._on_trajectory(msg)

        ik._trajectory_pub.publish = deliver
        for publisher in ("_commands_pub", "_states_pub", "_timing_pub"):
            if getattr(ik, publisher, None) is not None:
                getattr(ik, publisher).publish = lambda msg: None

        sec, nanosec = divmod(ORIGIN_NS, 1_000_000_000)
        plan = plan_to_msg(timeline, 1, True, Time(sec=sec, nanosec=nanosec))
        planner._on_plan(plan)
        ik._on_plan(plan)

        end = timeline.t_end + loop.params.settle_time
        while loop_sim.time < end - 1e-9:
            loop.step()
            sim._on_timer()
            sample = samples.pop()
            ik._on_sensor_state(sample)
            planner._on_sensor_state(sample)
            while references:
                ik._on_reference(references.pop(0))
            while announced:
                ik._on_reference_ahead(announced.pop(0))
            assert not loop.fallen
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return trajectories, loop, graph_sim, loop_sim


def assert_identical(trajectories, loop, graph_sim, loop_sim) -> None:
    """Every trajectory equals the loop's command bit for bit; both plants end in the same state."""
    for msg, command in zip(trajectories, loop.commands):
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        assert stamp == command.stamp_ns
        positions = np.array([point.positions for point in msg.points])
        velocities = np.array([point.velocities for point in msg.points])
        assert np.array_equal(positions, command.positions)  # bit for bit
        assert np.array_equal(velocities, command.velocities)
    assert np.array_equal(graph_sim.state.q, loop_sim.state.q)


def test_graph_nodes_and_the_in_process_loop_give_identical_commands_on_a_ten_step_walk(talos):
    from test_closed_loop import timeline_of

    timeline = timeline_of(talos, "forward")
    assert len(timeline.steps) == 10
    run = run_graph_and_loop(talos, timeline, lambda: KinematicSim(KinematicSim.Parameters(), robot=talos))
    trajectories, loop = run[:2]
    assert len(trajectories) == len(loop.commands) > 400
    assert_identical(*run)
    landed = loop.outcome().landing_errors
    assert sorted(landed) == [s.step_index for s in timeline.steps] and max(landed.values()) < 1e-3


def test_with_the_stabilizer_the_graph_nodes_and_the_in_process_loop_give_identical_commands(talos):
    pytest.importorskip("mujoco")
    from test_closed_loop import timeline_of

    from walk_mpc.core.sim.mujoco import MujocoSim

    run = run_graph_and_loop(talos, timeline_of(talos, "short"),
                             lambda: MujocoSim(KinematicSim.Parameters(), robot=talos),
                             stabilizer=StabilizerParameters(enabled=True))
    trajectories, loop = run[:2]
    assert len(trajectories) == len(loop.commands) > 200
    assert loop.whole_body.stabilizer.output.active or loop.whole_body.stabilizer.log()
    assert_identical(*run)
