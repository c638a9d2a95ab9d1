"""Launch the walk_mpc node graph of config/graph.yaml with the parameters of config/<robot>.yaml.

ros2 launch walk_mpc walk.launch.py [robot:=talos|g1|romeo|icub|upkie] [sim:=kinematic|mujoco|none]
                                    [namespace:=robot1] [rviz:=false] [config:=FILE]
                                    [control_process:=false]

A robot with a ``model`` in config/graph.yaml (a robot description, config/robots/<model>.yaml) gets its
values on top of the parameters file (walk_mpc.graph.Graph.overrides). A namespace puts the nodes, topics,
services, actions and frames (``<namespace>/world``) of the graph under it: launch one graph per robot,
e.g. ``namespace:=robot1 robot:=g1`` and ``namespace:=robot2 robot:=talos``.

``control_process:=true`` runs the robot's control nodes (every node but the sim) in one process on one
executor (the ``bringup`` executable, :meth:`walk_mpc.graph.Graph.processes`), beside the sim's own: about a
third less CPU per robot, what lets four robots hold the 10 ms period on a 2-core machine
(benchmarks/multi_robot.py); the nodes, topics and parameters are the same, but a node can then not be
stopped or restarted alone.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from walk_mpc.graph import (
    CONTROL,
    check_namespace,
    control_arguments,
    dds_environment,
    default_config_directory,
    load_graph,
    namespace_frames,
    namespaced_parameters_file,
)


def _nodes(context):
    graph = load_graph()
    robot = LaunchConfiguration("robot").perform(context)
    sim = LaunchConfiguration("sim").perform(context)
    config = (LaunchConfiguration("params_file").perform(context)
              or LaunchConfiguration("config").perform(context) or None)
    namespace = check_namespace(LaunchConfiguration("namespace").perform(context))
    balance = LaunchConfiguration("balance").perform(context).lower() in ("true", "1", "yes")
    parameters = graph.config_path(robot, config, balance, sim=sim)
    params_file = str(namespaced_parameters_file(parameters, namespace))
    overrides = graph.overrides(robot)
    for node, values in namespace_frames(namespace).items():
        overrides.setdefault(node, {}).update(values)
    phase_offset = LaunchConfiguration("phase_offset").perform(context)
    if phase_offset:
        overrides.setdefault("sim", {})["phase_offset"] = float(phase_offset)
    control_process = LaunchConfiguration("control_process").perform(context).lower() in ("true", "1", "yes")
    processes = graph.processes(robot, sim, control_process)
    # walk_mpc's Fast DDS profile for the nodes (a restarted node discovered at once), unless another RMW or a
    # profile of the user's is set, or WALK_MPC_FASTDDS_PROFILE=0 (walk_mpc.graph.dds_environment).
    actions = [SetEnvironmentVariable(name, value) for name, value in dds_environment().items()]
    if CONTROL in processes:  # no node name or namespace here: the bringup names and namespaces its nodes
        actions.append(Node(package="walk_mpc", executable="bringup", output="screen",
                            arguments=control_arguments(robot, sim, processes[CONTROL], config, namespace,
                                                        balance)))
    for spec in graph.select(robot, sim):
        if spec.name not in processes:
            continue
        values = dict(overrides.get(spec.name, {}))
        if spec.name == "sim":
            values["backend"] = sim
        actions.append(Node(package="walk_mpc", executable=spec.executable, name=spec.name, output="screen",
                            namespace=namespace or None,
                            parameters=[params_file] + ([values] if values else [])))
    if LaunchConfiguration("rviz").perform(context).lower() in ("true", "1", "yes"):
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            namespace=namespace or None,
                            arguments=["-d", str(default_config_directory() / "walk_mpc.rviz")]))
    return actions


def generate_launch_description() -> LaunchDescription:
    robots = load_graph().robots
    walkers = ", ".join(r.name for r in robots if r.legs)
    wheeled = ", ".join(r.name for r in robots if r.wheels)
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="talos",
                              description=f"robot of config/graph.yaml: {walkers} (walk) or {wheeled} "
                                          "(wheels)"),
        DeclareLaunchArgument("sim", default_value="kinematic",
                              description="simulator backend: kinematic, mujoco, or none (real robot)"),
        DeclareLaunchArgument("namespace", default_value="",
                              description="namespace of the graph's nodes, topics and frames "
                                          "(several robots)"),
        DeclareLaunchArgument("rviz", default_value="false",
                              description="start rviz2 with config/walk_mpc.rviz"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="parameters file (default: config/<robot's file> from graph.yaml)"),
        DeclareLaunchArgument("config", default_value="", description="former name of params_file"),
        DeclareLaunchArgument("balance", default_value="false",
                              description="the robot's balance setting over the parameters file "
                                          "(graph.yaml 'balance', e.g. config/balance_talos.yaml)"),
        DeclareLaunchArgument("control_process", default_value="false",
                              description="run the control nodes (all but the sim) in one process"),
        DeclareLaunchArgument("phase_offset", default_value="",
                              description="[s] the sim's samples at k * period + this on the system clock: "
                                          "give robots on one computer different offsets ('' = the "
                                          "params file's)"),
        OpaqueFunction(function=_nodes),
    ])
