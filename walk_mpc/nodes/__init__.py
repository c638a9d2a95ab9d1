"""ROS 2 adapters of walk_mpc: message -> core types -> one core call -> message. No algorithm here."""
