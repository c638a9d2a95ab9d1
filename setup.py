"""pip installation of the ROS-free core of walk_mpc (``pip install .``).

colcon does not use this file: package.xml declares ament_cmake, and CMakeLists.txt generates the ROS
interfaces and installs the whole package (core, nodes, messages, executables). This file installs only
``walk_mpc`` and ``walk_mpc.core`` for users who want the algorithms as a plain Python library.
"""

from setuptools import setup

setup()
