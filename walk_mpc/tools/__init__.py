"""Command-line tools of walk_mpc that work without the ros2 CLI (topic probe, sensor replay, demo)."""
