"""A robot's balance setting (config/graph.yaml ``balance``): an overlay of its parameters file that
``balance:=true`` / ``--balance`` lays over it, the same file for the launch file, the node processes, the
in-process bringup and benchmarks/robustness.py."""

from __future__ import annotations

import pytest

from walk_mpc.core.errors import ConfigError
from walk_mpc.core.params import load_yaml
from walk_mpc.graph import load_graph, overlay_parameters, overlay_parameters_file


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_the_overlay_replaces_values_merges_groups_and_keeps_the_rest(tmp_path):
    base = _write(tmp_path / "base.yaml", """
ik:
  ros__parameters:
    control_period: 0.02
    stabilizer: {enabled: false, dcm_gain: 5.0}
sim:
  ros__parameters: {backend: kinematic}
""")
    overlay = _write(tmp_path / "balance.yaml", """
ik:
  ros__parameters:
    stabilizer: {enabled: true}
walk_behavior:
  ros__parameters:
    step_adjustment: {enabled: true}
""")
    merged = load_yaml(overlay_parameters_file(base, overlay, directory=tmp_path / "out"))
    assert merged == overlay_parameters(base, overlay)
    assert merged["ik"]["ros__parameters"] == {"control_period": 0.02,
                                               "stabilizer": {"enabled": True, "dcm_gain": 5.0}}
    assert merged["sim"]["ros__parameters"] == {"backend": "kinematic"}
    assert merged["walk_behavior"]["ros__parameters"] == {"step_adjustment": {"enabled": True}}
    assert load_yaml(base)["ik"]["ros__parameters"]["stabilizer"]["enabled"] is False  # the file untouched


@pytest.mark.parametrize("text, match", [
    ("planner:\n  ros__parameters: {x: 1}\n", "'planner' is not a node of the graph"),
    ("ik:\n  stabilizer: {enabled: true}\n", "ros__parameters"),
    ("ik:\n  ros__parameters: {stabilizer: true}\n", "has a group"),
    ("ik:\n  ros__parameters: {control_period: {x: 1}}\n", "has the value 0.02"),
])
def test_an_overlay_that_cannot_apply_is_refused_naming_where(tmp_path, text, match):
    base = _write(tmp_path / "base.yaml", "ik:\n  ros__parameters:\n    control_period: 0.02\n"
                                          "    stabilizer: {enabled: false}\n")
    overlay = _write(tmp_path / "balance.yaml", text)
    with pytest.raises(ConfigError, match=match) as error:
        overlay_parameters_file(base, overlay, directory=tmp_path)
    assert "balance.yaml" in str(error.value)


def test_talos_has_a_balance_setting_and_a_robot_without_one_is_refused(tmp_path):
    graph = load_graph()
    assert graph.balance_path("talos").name == "balance_talos.yaml"
    merged = load_yaml(graph.config_path("talos", balance=True, directory=tmp_path, sim="mujoco"))
    plain = load_yaml(graph.config_path("talos"))
    assert merged["ik"]["ros__parameters"]["stabilizer"]["enabled"] is True
    assert plain["ik"]["ros__parameters"]["stabilizer"]["enabled"] is False
    assert merged["walk_behavior"]["ros__parameters"]["step_adjustment"] == {
        "enabled": True, "adapt_timing": True, "least_timing_change": True}
    assert merged["walk_behavior"]["ros__parameters"]["recovery_step"] == {"enabled": True}
    assert merged["mpc_planner"] == plain["mpc_planner"] and merged["sim"] == plain["sim"]
    with pytest.raises(ConfigError, match="robot 'g1' has no balance setting.*talos"):
        graph.config_path("g1", balance=True, sim="mujoco")
    assert graph.config_path("talos", balance=True, directory=tmp_path / "real", sim="none").is_file()


def test_the_balance_setting_is_refused_on_the_kinematic_plant(talos):
    """The kinematic plant's centre of pressure is the ZMP of its own motion: the stabilizer's ankle
    admittance oscillates on it (standing, the joints still move at more than 0.3 rad/s after 2 s; without
    the ankle admittance they settle). A balance setting there is refused, naming the backends it applies
    to."""
    import numpy as np

    from walk_mpc.core.control.closed_loop import ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

    def joint_speed_after_2_s(**stabilizer) -> float:
        sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
        timeline = Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), [], GaitTiming())
        loop = ClosedLoopWalk(talos, sim, timeline, stage_options={
            "whole_body": {"stabilizer": StabilizerParameters(enabled=True, **stabilizer)}})
        speeds = []
        while sim.time < 3.0 - 1e-9:
            loop.step()
            if sim.time > 2.0:
                speeds.append(float(np.abs(sim.sensor_sample().joint_vel).max()))
        return max(speeds)

    assert joint_speed_after_2_s() > 0.3
    assert joint_speed_after_2_s(cop_admittance=0.0) < 0.05
    with pytest.raises(ConfigError, match="sim 'kinematic' is not one of \\['mujoco', 'none'\\]"):
        load_graph().config_path("talos", balance=True, sim="kinematic")


def test_robustness_applies_the_balance_setting_as_its_options(robustness, tmp_path):
    options = robustness.balance_options(load_graph().balance_path("talos"))
    assert options["step_adjustment"] is True and options["recovery_step"] is True
    assert options["adjust"] == {"adapt_timing": True, "least_timing_change": True}
    assert options["stabilizer"] == options["recovery"] == {}
    tuned = _write(tmp_path / "tuned.yaml", """
ik:
  ros__parameters:
    stabilizer: {enabled: true, tip_angle: 0.035}
    solver: {pelvis_level_gain: 1.0}
mpc_planner:
  ros__parameters:
    planner: {zmp_inward_offset: 0.035}
""")
    options = robustness.balance_options(tuned)
    assert options["stabilizer"] == {"tip_angle": 0.035} and options["ik"] == {"pelvis_level_gain": 1.0}
    assert options["planner"] == {"zmp_inward_offset": 0.035} and options["step_adjustment"] is False
    with pytest.raises(ConfigError, match="cannot apply"):
        robustness.balance_options(_write(tmp_path / "other.yaml", "sim:\n  ros__parameters: {x: 1}\n"))
    with pytest.raises(ConfigError, match="stabilizer must be enabled"):
        robustness.balance_options(_write(tmp_path / "off.yaml",
                                          "ik:\n  ros__parameters:\n    stabilizer: {tip_angle: 0.03}\n"))


@pytest.mark.ros
def test_the_nodes_start_with_the_balance_setting(tmp_path):
    """The in-process bringup with ``balance``: the nodes accept every parameter of the setting (a name
    that is none of theirs would be refused) and run with it."""
    rclpy = pytest.importorskip("rclpy")
    from walk_mpc.nodes.bringup import _destroy, create_nodes

    context = rclpy.context.Context()
    rclpy.init(context=context)
    try:
        nodes = create_nodes("talos", "mujoco", context=context, balance=True,
                             names=["walk_behavior", "ik"])
        try:
            values = {(n.get_name(), name): n.get_parameter(name).value for n in nodes
                      for name in ("step_adjustment.enabled", "recovery_step.enabled", "stabilizer.enabled")
                      if n.has_parameter(name)}
            assert values == {("walk_behavior", "step_adjustment.enabled"): True,
                              ("walk_behavior", "recovery_step.enabled"): True,
                              ("ik", "stabilizer.enabled"): True}
        finally:
            for node in nodes:
                _destroy(node)
    finally:
        rclpy.try_shutdown(context=context)


@pytest.mark.ros
def test_the_graph_with_the_balance_setting_walks_on_mujoco_without_a_recovery_step(tmp_path):
    """The node processes with ``balance`` on MuJoCo (as ``make demo SIM=mujoco BALANCE=1``): a 4-step walk
    succeeds, and no standing recovery step fires at start (the stabilizer's start-up moves stay inside the
    soles), which the walk behavior's log would say."""
    pytest.importorskip("mujoco")
    from graph_fixtures import running_graph

    from walk_mpc.core.walk.behavior import WalkErrorCode
    from walk_mpc.tools.launch_graph import GraphProcesses

    processes = GraphProcesses("talos", "mujoco", log_dir=tmp_path, balance=True)
    with running_graph(processes) as (client, _):
        client.wait_standing()
        outcome, _ = client.walk(client.forward_steps(4))
        assert outcome.error_code == WalkErrorCode.NONE, f"{outcome}\n{client.diagnose()}"
    log = (tmp_path / "walk_behavior.log").read_text(encoding="utf-8")
    assert "recovery step" not in log, log
    assert load_yaml(processes.params_file)["ik"]["ros__parameters"]["stabilizer"]["enabled"] is True
