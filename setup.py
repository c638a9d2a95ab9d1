"""pip installation of the ROS-free core of walk_mpc (``pip install .``).

colcon does not use this file: package.xml declares ament_cmake, and CMakeLists.txt generates the ROS
interfaces and installs the whole package (core, nodes, messages, executables). This file (with setup.cfg,
``packages = find:``) installs ``walk_mpc.core`` and all its subpackages (body, control, mpc, sim, walk,
wheel) for users who want the algorithms as a plain Python library, plus the top-level ``walk_mpc`` package
with its own modules: ``walk_mpc.graph`` (ROS-free) and ``walk_mpc.demo`` (which needs rclpy and the colcon
build). ``walk_mpc.nodes`` and ``walk_mpc.tools`` (ROS adapters) are not installed. test/test_packaging.py
builds the wheel and imports the core from it.
"""

from setuptools import setup

setup()
