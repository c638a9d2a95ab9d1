"""Launch the walk_mpc node graph of config/graph.yaml with the parameters of config/<robot>.yaml.

ros2 launch walk_mpc walk.launch.py [robot:=talos] [sim:=kinematic|mujoco|none] [rviz:=false] [config:=FILE]
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from walk_mpc.graph import default_config_directory, load_graph


def _nodes(context):
    graph = load_graph()
    robot = LaunchConfiguration("robot").perform(context)
    sim = LaunchConfiguration("sim").perform(context)
    config = LaunchConfiguration("config").perform(context) or None
    params_file = str(graph.config_path(robot, config))
    actions = [
        Node(package="walk_mpc", executable=spec.executable, name=spec.name, output="screen",
             parameters=[params_file] + ([{"backend": sim}] if spec.name == "sim" else []))
        for spec in graph.select(robot, sim)
    ]
    if LaunchConfiguration("rviz").perform(context).lower() in ("true", "1", "yes"):
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            arguments=["-d", str(default_config_directory() / "walk_mpc.rviz")]))
    return actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="talos",
                              description="robot: talos (walks) or upkie (wheels); see config/graph.yaml"),
        DeclareLaunchArgument("sim", default_value="kinematic",
                              description="simulator backend: kinematic, mujoco, or none (real robot)"),
        DeclareLaunchArgument("rviz", default_value="false",
                              description="start rviz2 with config/walk_mpc.rviz"),
        DeclareLaunchArgument("config", default_value="",
                              description="parameters file (default: config/<robot's file> from graph.yaml)"),
        OpaqueFunction(function=_nodes),
    ])
