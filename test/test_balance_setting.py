"""A robot's balance setting (config/graph.yaml ``balance``): an overlay of its parameters file that
``balance:=true`` / ``--balance`` lays over it, the same file for the launch file, the node processes, the
in-process bringup and benchmarks/robustness.py."""

from __future__ import annotations

import pytest

from walk_mpc.core.errors import ConfigError
from walk_mpc.core.params import load_yaml
from walk_mpc.graph import load_graph, overlay_parameters_file


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
    assert merged["walk_behavior"]["ros__parameters"]["step_adjustment"] == {"enabled": True}
    assert merged["walk_behavior"]["ros__parameters"]["recovery_step"] == {"enabled": True}
    assert merged["mpc_planner"] == plain["mpc_planner"] and merged["sim"] == plain["sim"]
    with pytest.raises(ConfigError, match="robot 'g1' has no balance setting.*talos"):
        graph.config_path("g1", balance=True, sim="mujoco")
    assert graph.config_path("talos", balance=True, directory=tmp_path / "real", sim="none").is_file()


def test_the_balance_setting_is_refused_on_the_kinematic_plant():
    """The kinematic plant's centre of pressure is the ZMP of its own motion: the stabilizer's ankle
    admittance oscillates on it. A balance setting there is refused, naming the backends it applies to."""
    with pytest.raises(ConfigError, match="sim 'kinematic' is not one of \\['mujoco', 'none'\\]"):
        load_graph().config_path("talos", balance=True, sim="kinematic")


def test_robustness_applies_the_balance_setting_as_its_options(robustness, tmp_path):
    options = robustness.balance_options(load_graph().balance_path("talos"))
    assert options["step_adjustment"] is True and options["recovery_step"] is True
    assert options["stabilizer"] == options["adjust"] == options["recovery"] == {}
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
